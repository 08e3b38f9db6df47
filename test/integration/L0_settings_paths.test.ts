// Files and URLs a client names through the settings APIs (issue 21, item
// 2). Without --trace-dir / --log-dir the engine answers as Triton does:
// trace_file and log_file "can not be updated through network protocol";
// opentelemetry_url likewise (the engine would POST to any URL). With the
// folders given, a file under them is taken (relative names from the
// folder) and written; '..', other folders and symbolic links are refused,
// and a link planted after the check is not followed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { traceSettingsFromFlags } from '../../engine/tracing/trace-manager.ts';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { setLogFile, setLogVerbose } from '../../common/logger.ts';
import { grpcError, httpJson, removeDir, startTestEngine, tempRepo } from './helpers.ts';

const infer = (port: number, id: string) =>
  httpJson(port, 'POST', '/v2/models/js_echo/infer', { id, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2], data: [1, 2] }] });

describe('L0_settings_paths: no --trace-dir / --log-dir (Triton)', () => {
  let engine: RunningEngine;
  let repo: string;
  let dir: string;
  let grpc: TritonGrpcClient;
  beforeAll(async () => {
    repo = tempRepo('l0-settings', ['js_echo']);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'l0-settings-out-'));
    const traceConfig = traceSettingsFromFlags([`triton,file=${path.join(dir, 'start.json')}`, 'level=TIMESTAMPS', 'rate=1']);
    engine = await startTestEngine({ modelRepository: repo, traceConfig });
    grpc = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
  }, 60_000);
  afterAll(async () => {
    grpc?.close();
    await engine?.stop();
    removeDir(repo);
    removeDir(dir);
  });

  it('refuses trace_file over HTTP (global, per model, even the start file) and gRPC, and writes nothing there', async () => {
    const target = path.join(dir, 'client.json');
    const refused = { status: 501, json: { error: 'trace file location can not be updated through network protocol' } };
    expect(await httpJson(engine.httpPort, 'POST', '/v2/trace/setting', { trace_file: target })).toEqual(refused);
    expect(
      await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/trace/setting', { trace_file: target, trace_level: ['TENSORS'] }),
    ).toEqual(refused);
    expect(await httpJson(engine.httpPort, 'POST', '/v2/trace/setting', { trace_file: path.join(dir, 'start.json') })).toEqual(refused);
    expect(await grpcError(grpc.traceSetting({ trace_file: { value: [target] } }, 'js_echo'))).toEqual({
      code: 12,
      details: refused.json.error,
    });
    // Nothing of the refused update was applied.
    expect((await httpJson(engine.httpPort, 'GET', '/v2/models/js_echo/trace/setting')).json.trace_level).toEqual(['TIMESTAMPS']);
    await infer(engine.httpPort, 'r1');
    expect(fs.existsSync(target)).toBe(false);
  });

  it('refuses a new opentelemetry_url (the engine would POST where a client says)', async () => {
    const refused = { status: 501, json: { error: 'opentelemetry url can not be updated through network protocol' } };
    expect(await httpJson(engine.httpPort, 'POST', '/v2/trace/setting', { opentelemetry_url: 'http://10.0.0.1:9/x' })).toEqual(refused);
    expect(await grpcError(grpc.traceSetting({ opentelemetry_url: { value: ['http://h/x'] } }))).toMatchObject({ code: 12 });
    expect((await httpJson(engine.httpPort, 'GET', '/v2/trace/setting')).json.opentelemetry_url).toBe('http://localhost:4318/v1/traces');
  });

  it('refuses log_file (a null one is ignored, as in Triton)', async () => {
    const refused = { status: 501, json: { error: 'log file location can not be updated through network protocol' } };
    expect(await httpJson(engine.httpPort, 'POST', '/v2/logging', { log_file: path.join(dir, 'x.log') })).toEqual(refused);
    expect(await grpcError(grpc.logSettings({ log_file: { string_param: 'x.log' } }))).toEqual({ code: 12, details: refused.json.error });
    const ok = await httpJson(engine.httpPort, 'POST', '/v2/logging', { log_file: null, log_info: false });
    expect(ok.json).toMatchObject({ log_file: '', log_info: false });
    await httpJson(engine.httpPort, 'POST', '/v2/logging', { log_info: true });
    expect(fs.existsSync(path.join(dir, 'x.log'))).toBe(false);
  });
});

describe('L0_settings_paths: --trace-dir and --log-dir', () => {
  let engine: RunningEngine;
  let repo: string;
  let traceDir: string;
  let logDir: string;
  let outside: string;
  beforeAll(async () => {
    repo = tempRepo('l0-settings-dirs', ['js_echo']);
    traceDir = fs.mkdtempSync(path.join(os.tmpdir(), 'l0-trace-dir-'));
    logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'l0-log-dir-'));
    outside = fs.mkdtempSync(path.join(os.tmpdir(), 'l0-outside-'));
    engine = await startTestEngine({
      modelRepository: repo,
      traceDir,
      logDir,
      traceConfig: traceSettingsFromFlags(['level=TIMESTAMPS', 'rate=1']),
    });
  }, 60_000);
  afterAll(async () => {
    setLogVerbose(0);
    setLogFile(undefined);
    await engine?.stop();
    for (const d of [repo, traceDir, logDir, outside]) removeDir(d);
  });

  it('takes a trace_file under --trace-dir (relative to it) and writes the traces there', async () => {
    const r = await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/trace/setting', { trace_file: 'model.json' });
    expect(r.status).toBe(200);
    const file = path.join(fs.realpathSync(traceDir), 'model.json');
    expect(r.json.trace_file).toBe(file);
    await infer(engine.httpPort, 'in-dir');
    await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/trace/setting', { trace_rate: '1' }); // flushes
    expect(JSON.parse(fs.readFileSync(file, 'utf8')).some((t: { request_id?: string }) => t.request_id === 'in-dir')).toBe(true);
  });

  it("refuses '..', folders elsewhere, links on the way and odd names, naming the setting", async () => {
    fs.symlinkSync(outside, path.join(traceDir, 'link-dir'));
    fs.symlinkSync(path.join(outside, 'victim.json'), path.join(traceDir, 'link-file.json'));
    const cases: Array<[string, string]> = [
      ['../escape.json', "must not contain '..'"],
      ['a/../../escape.json', "must not contain '..'"],
      [path.join(outside, 'abs.json'), 'is not under the folder given with --trace-dir'],
      ['link-dir/t.json', 'passes through a symbolic link'],
      ['link-file.json', 'passes through a symbolic link'],
      ['missing/t.json', 'names a folder that does not exist under the folder given with --trace-dir'],
      ['bad\u0000name', 'contains a NUL character'],
      ['', ''],
    ];
    for (const [name, why] of cases) {
      const r = await httpJson(engine.httpPort, 'POST', '/v2/trace/setting', { trace_file: name });
      if (name === '') {
        expect(r.status).toBe(200); // '' is "no file"
        continue;
      }
      expect([name, r.status], name).toEqual([name, 400]);
      expect(r.json.error).toBe(`trace_file '${name}' ${why}`);
    }
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('a link planted after the check is not followed when the traces are written', async () => {
    const victim = path.join(outside, 'planted-victim.json');
    fs.writeFileSync(victim, 'untouched');
    expect((await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/trace/setting', { trace_file: 'planted.json' })).status).toBe(200);
    fs.symlinkSync(victim, path.join(traceDir, 'planted.json'));
    await infer(engine.httpPort, 'planted');
    await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/trace/setting', { trace_rate: '1' }); // flushes: the open fails (ELOOP), logged
    expect(fs.readFileSync(victim, 'utf8')).toBe('untouched');
  });

  it('takes a log_file under --log-dir and sends the log there; refuses one elsewhere', async () => {
    const refused = await httpJson(engine.httpPort, 'POST', '/v2/logging', { log_file: path.join(outside, 'e.log') });
    expect(refused).toEqual({
      status: 400,
      json: { error: `log_file '${path.join(outside, 'e.log')}' is not under the folder given with --log-dir` },
    });
    const r = await httpJson(engine.httpPort, 'POST', '/v2/logging', { log_file: 'engine.log', log_verbose_level: 1 });
    const file = path.join(fs.realpathSync(logDir), 'engine.log');
    expect(r.json).toMatchObject({ log_file: file, log_verbose_level: 1 });
    await infer(engine.httpPort, 'logged');
    await httpJson(engine.httpPort, 'POST', '/v2/logging', { log_verbose_level: 0 });
    expect(fs.readFileSync(file, 'utf8')).toMatch(/TRACE /);
    // A bad value anywhere in an update changes nothing of it.
    const bad = await httpJson(engine.httpPort, 'POST', '/v2/logging', { log_file: '', log_info: 'yes' });
    expect(bad.status).toBe(400);
    expect((await httpJson(engine.httpPort, 'GET', '/v2/logging')).json.log_file).toBe(file);
    expect((await httpJson(engine.httpPort, 'POST', '/v2/logging', { log_file: '' })).json.log_file).toBe('');
  });
});
