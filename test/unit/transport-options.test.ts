// One switch (issue 38): the transport choices of each process are one typed
// object built by its option parsing from flag, then environment, then
// default; no other module reads a transport environment variable.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';
import { DEFAULT_ENGINE_TRANSPORT, ENGINE_TRANSPORT_ENV, REMOVED_TRANSPORT_ENV } from '../../engine/frontends/transport-options.ts';
import { parseArgs as parseGatewayArgs } from '../../gateway/main.ts';
import { DEFAULT_GATEWAY_TRANSPORT, GATEWAY_TRANSPORT_ENV } from '../../gateway/core/transport-options.ts';
import { sourceFiles } from '../fixtures/source-scan.ts';

const engine = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseEngineArgs(['--model-repository=/r', ...argv], env).transport!;

describe('engine transport options', () => {
  it('defaults with no flag and no variable', () => {
    expect(engine([])).toEqual(DEFAULT_ENGINE_TRANSPORT);
  });

  it('ENGINE_GRPC_FRONT sets the gRPC front; --grpc-front wins over it', () => {
    expect(engine([], { ENGINE_GRPC_FRONT: 'own' })).toEqual({ ...DEFAULT_ENGINE_TRANSPORT, grpcFront: 'own' });
    expect(engine(['--grpc-front=grpc-js'], { ENGINE_GRPC_FRONT: 'own' })).toEqual({ ...DEFAULT_ENGINE_TRANSPORT, grpcFront: 'grpc-js' });
    expect(engine(['--grpc-front', 'default'], { ENGINE_GRPC_FRONT: 'own' }).grpcFront).toBe('default');
  });

  it('a bad value is refused naming the flag or the variable it came from', () => {
    expect(() => engine(['--grpc-front=h3'])).toThrow(/^--grpc-front: expected own, grpc-js or default, got 'h3'/);
    expect(() => engine([], { ENGINE_GRPC_FRONT: 'h3' })).toThrow(/^ENGINE_GRPC_FRONT: expected/);
  });

  it('the switches removed with their doors stop the start, flag and variable alike', () => {
    for (const v of ['ENGINE_GRPC_DIRECT_INFER', 'ENGINE_GRPC_POOLED_DECODER', 'ENGINE_HTTP1_FRONT'])
      expect(() => engine([], { [v]: '0' })).toThrow(new RegExp(`^${v}: removed in issue 38`));
    for (const f of ['--grpc-direct-infer=false', '--grpc-pooled-decoder=false', '--http1-front=false'])
      expect(() => engine([f])).toThrow(/Unknown option/);
  });
});

describe('gateway transport options', () => {
  it('defaults with no flag and no variable', () => {
    expect(parseGatewayArgs([], {}).transport).toEqual({
      ...DEFAULT_GATEWAY_TRANSPORT,
      engineLocalSocket: undefined,
      engineHttp: undefined,
    });
  });

  it('a variable sets an option; its flag wins over it', () => {
    const env = { GATEWAY_ENGINE_LOCAL_SOCKET: '/e.sock', GATEWAY_ENGINE_HTTP: 'e:8000', GATEWAY_GRPC_DIRECT_INFER: '0' };
    expect(parseGatewayArgs([], env).transport).toMatchObject({
      engineLocalSocket: '/e.sock',
      engineHttp: 'e:8000',
      engineGrpcDirect: false,
    });
    expect(
      parseGatewayArgs(['--engine-local-socket=/f.sock', '--engine-http=f:8000', '--engine-grpc-direct=true', '--direct-route=false'], env)
        .transport,
    ).toEqual({ engineLocalSocket: '/f.sock', engineHttp: 'f:8000', engineGrpcDirect: true, directRoute: false, http1Front: true });
  });

  it('a bad value is refused naming where it came from', () => {
    expect(() => parseGatewayArgs([], { GATEWAY_GRPC_DIRECT_INFER: 'nope' })).toThrow(/^GATEWAY_GRPC_DIRECT_INFER: expected true or false/);
    expect(() => parseGatewayArgs(['--http1-front=nope'], {})).toThrow(/^--http1-front: expected true or false/);
  });
});

describe('one switch', () => {
  it('no module but the option parsing reads a transport environment variable', () => {
    const names = [...Object.values(ENGINE_TRANSPORT_ENV), ...REMOVED_TRANSPORT_ENV, ...Object.values(GATEWAY_TRANSPORT_ENV)];
    const read = new RegExp(`process\\.env(?:\\.|\\[['"\`])(?:${names.join('|')})\\b|\\benv\\.(?:${names.join('|')})\\b`);
    const found = sourceFiles(['engine', 'gateway', 'client', 'net', 'common', 'protocol', 'scripts']).filter((f) =>
      read.test(fs.readFileSync(f, 'utf8')),
    );
    expect(found).toEqual([]);
  });
});
