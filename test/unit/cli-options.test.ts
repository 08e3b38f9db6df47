// Triton's flags: both `--flag=value` and `--flag value`, defaults, and errors
// that name the flag.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { ENGINE_FLAGS, parseEngineArgs, USAGE } from '../../engine/server/cli-options.ts';

describe('parseEngineArgs', () => {
  it("uses Triton's defaults", () => {
    const o = parseEngineArgs(['--model-repository=/models']);
    expect(o).toMatchObject({
      modelRepository: '/models',
      grpcPort: 8001,
      httpPort: 8000,
      metricsPort: 8002,
      controlMode: 'none',
      strictModelConfig: false,
      strictReadiness: true,
      allowClientShm: false,
      logVerbose: 0,
      loadModels: [],
    });
  });

  it('takes --flag=value and --flag value alike, and repeated --load-model', () => {
    const o = parseEngineArgs([
      '--model-repository',
      '/m',
      '--grpc-port',
      '9001',
      '--http-port=9000',
      '--model-control-mode',
      'explicit',
      '--load-model',
      'a',
      '--load-model=b',
      '--strict-model-config=true',
      '--allow-client-shm',
      'true',
      '--shm-key-prefix=/app_',
      '--shm-max-regions',
      '4',
      '--shm-max-bytes=1048576',
      '--log-verbose',
      '1',
    ]);
    expect(o).toMatchObject({
      modelRepository: '/m',
      grpcPort: 9001,
      httpPort: 9000,
      controlMode: 'explicit',
      loadModels: ['a', 'b'],
      strictModelConfig: true,
      allowClientShm: true,
      shmKeyPrefix: '/app_',
      shmMaxRegions: 4,
      shmMaxBytes: 1048576,
      logVerbose: 1,
    });
  });

  it("takes Triton's --exit-timeout-secs (default 30), refusing negatives and non-integers", () => {
    expect(parseEngineArgs(['--model-repository=/m']).exitTimeoutSecs).toBe(30);
    expect(parseEngineArgs(['--model-repository=/m', '--exit-timeout-secs', '5']).exitTimeoutSecs).toBe(5);
    expect(parseEngineArgs(['--model-repository=/m', '--exit-timeout-secs=0']).exitTimeoutSecs).toBe(0);
    expect(() => parseEngineArgs(['--model-repository=/m', '--exit-timeout-secs=-1'])).toThrow(
      /--exit-timeout-secs: expected a non-negative integer/,
    );
    expect(() => parseEngineArgs(['--model-repository=/m', '--exit-timeout-secs=soon'])).toThrow(/--exit-timeout-secs/);
  });

  it("names the server 'triton' unless --server-name says otherwise", () => {
    expect(parseEngineArgs(['--model-repository=/m']).serverName).toBeUndefined();
    expect(parseEngineArgs(['--model-repository=/m', '--server-name', 'mine']).serverName).toBe('mine');
  });

  it('collects repeated --trace-config into trace settings', () => {
    const o = parseEngineArgs([
      '--model-repository=/m',
      '--trace-config',
      'triton,file=/tmp/t.json',
      '--trace-config=level=TIMESTAMPS',
      '--trace-config',
      'rate=1',
    ]);
    expect(o.traceConfig).toEqual({ trace_file: ['/tmp/t.json'], trace_level: ['TIMESTAMPS'], trace_rate: ['1'] });
    expect(() => parseEngineArgs(['--model-repository=/m', '--trace-config', 'level=LOUD'])).toThrow(/--trace-config: .*trace_level/);
  });

  it('takes --grpc-unix-socket (an extra gRPC listener; none by default)', () => {
    expect(parseEngineArgs(['--model-repository=/m']).grpcUnixSocket).toBeUndefined();
    expect(parseEngineArgs(['--model-repository=/m', '--grpc-unix-socket', '/run/e.sock']).grpcUnixSocket).toBe('/run/e.sock');
  });

  it('takes --grpc-h2-limit=NAME=VALUE over the defaults, refusing unknown names and bad values', () => {
    const l = parseEngineArgs(['--model-repository=/m', '--grpc-h2-limit=max-concurrent-streams=10', '--grpc-h2-limit=idle-timeout-ms=0'])
      .grpcH2Limits!;
    expect(l.maxConcurrentStreams).toBe(10);
    expect(l.idleTimeoutMs).toBe(0);
    expect(l.maxHeaderFields).toBe(128);
    expect([l.floodPenaltyMs, l.floodPenaltyMaxMs]).toEqual([100, 5000]);
    const off = parseEngineArgs([
      '--model-repository=/m',
      '--grpc-h2-limit=flood-penalty-ms=0',
      '--grpc-h2-limit=flood-penalty-max-ms=800',
    ]);
    expect([off.grpcH2Limits!.floodPenaltyMs, off.grpcH2Limits!.floodPenaltyMaxMs]).toEqual([0, 800]);
    expect(() => parseEngineArgs(['--model-repository=/m', '--grpc-h2-limit=flood-penalty-max-ms=0'])).toThrow(/flood-penalty-max-ms/);
    expect(() => parseEngineArgs(['--model-repository=/m', '--grpc-h2-limit=nope=1'])).toThrow(/grpc-h2-limit/);
    expect(() => parseEngineArgs(['--model-repository=/m', '--grpc-h2-limit=reset-burst=0'])).toThrow(/reset-burst/);
  });

  it("takes Triton's --grpc-max-response-pool-size (no bound by default) and reads TRITONSERVER_DELAY_GRPC_RESPONSE", () => {
    expect(parseEngineArgs(['--model-repository=/m'], {}).grpcStreamPacing).toEqual({ maxResponsePoolSize: undefined, delayMs: 0 });
    const p = parseEngineArgs(['--model-repository=/m', '--grpc-max-response-pool-size=1'], { TRITONSERVER_DELAY_GRPC_RESPONSE: '2000' });
    expect(p.grpcStreamPacing).toEqual({ maxResponsePoolSize: 1, delayMs: 2000 });
    expect(() => parseEngineArgs(['--model-repository=/m', '--grpc-max-response-pool-size=0'])).toThrow(/grpc-max-response-pool-size/);
    expect(parseEngineArgs(['--model-repository=/m'], { TRITONSERVER_DELAY_GRPC_RESPONSE: 'x' }).grpcStreamPacing!.delayMs).toBe(0);
  });

  it('takes --stream-max-queued-bytes (64 MiB by default), refusing non-positive values', () => {
    expect(parseEngineArgs(['--model-repository=/m']).streamMaxQueuedBytes).toBe(64 * 1024 * 1024);
    expect(parseEngineArgs(['--model-repository=/m', '--stream-max-queued-bytes=1048576']).streamMaxQueuedBytes).toBe(1048576);
    expect(() => parseEngineArgs(['--model-repository=/m', '--stream-max-queued-bytes=0'])).toThrow(/stream-max-queued-bytes/);
  });

  it('turns a frontend off with --allow-grpc=false', () => {
    expect(parseEngineArgs(['--model-repository=/m', '--allow-grpc=false']).grpcPort).toBe(-1);
  });

  it('names the flag at fault', () => {
    expect(() => parseEngineArgs([])).toThrow(/--model-repository is required/);
    expect(() => parseEngineArgs(['--model-repository=/m', '--grpc-port=abc'])).toThrow(/--grpc-port: expected an integer, got 'abc'/);
    expect(() => parseEngineArgs(['--model-repository=/m', '--model-control-mode=sometimes'])).toThrow(/--model-control-mode/);
    expect(() => parseEngineArgs(['--model-repository=/m', '--strict-model-config=maybe'])).toThrow(
      /--strict-model-config: expected true or false/,
    );
    expect(() => parseEngineArgs(['--model-repository=/m', '--load-model=a'])).toThrow(/--load-model needs --model-control-mode=explicit/);
    expect(() => parseEngineArgs(['--model-repository=/m', '--no-such-flag'])).toThrow();
  });
});

describe('every engine flag is documented', () => {
  const reference = readFileSync(new URL('../../docs/reference.md', import.meta.url), 'utf8');
  it('in USAGE and in docs/reference.md', () => {
    const missing = Object.keys(ENGINE_FLAGS)
      .filter((f) => f !== 'help')
      .flatMap((f) =>
        [USAGE.includes(`--${f}`) ? [] : [`USAGE: --${f}`], reference.includes(`--${f}`) ? [] : [`reference.md: --${f}`]].flat(),
      );
    expect(missing).toEqual([]);
  });

  it("accepts Triton's --backend-directory (ignored, kept for the log) and python backend keys", () => {
    const o = parseEngineArgs([
      '--model-repository=/m',
      '--backend-directory=/opt/tritonserver/backends',
      '--backend-config=python,stub-timeout-seconds=120',
      '--backend-config=tensorflow,version=2',
    ]);
    expect(o.backendDirectory).toBe('/opt/tritonserver/backends');
    expect(o.backendConfig).toEqual({ python: { 'stub-timeout-seconds': '120' }, tensorflow: { version: '2' } });
  });
});
