// Traces (after Triton's L0_trace): Triton's JSON trace file with ordered
// timestamps and ensemble steps as child traces; TraceSetting changing level,
// rate and count at run time per model; and OpenTelemetry mode, where a real
// OTLP/HTTP receiver in this test gets the gateway's span and the engine's
// ensemble, step and compute spans of one /fn call under one trace id.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { traceSettingsFromFlags } from '../../engine/tracing/trace-manager.ts';
import { f32Bytes, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';
import { ENS_ECHO_CONFIG } from '../fixtures/test-models.ts';

const ORDER = ['REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END'];

function writeRepo(): string {
  const repo = tempRepo('l0-trace', ['js_echo']);
  fs.mkdirSync(path.join(repo, 'ens_echo', '1'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'ens_echo', 'config.pbtxt'), ENS_ECHO_CONFIG);
  return repo;
}
const echoReq = (model: string, v: number) => ({
  model_name: model,
  inputs: [{ name: model === 'ens_echo' ? 'X' : 'INPUT0', datatype: 'FP32', shape: [1] }],
  raw_input_contents: [f32Bytes([v])],
});

describe('L0_trace: Triton file mode', () => {
  let engine: RunningEngine;
  let repo: string;
  let dir: string;
  let client: ProtoClient;
  let file: string;
  const read = (): any[] => {
    engine.engine.tracing.flush();
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  };

  beforeAll(async () => {
    repo = writeRepo();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), `trace-${process.pid}-`));
    file = path.join(dir, 'trace.json');
    const traceConfig = traceSettingsFromFlags([`triton,file=${file}`, 'level=TIMESTAMPS', 'rate=1', 'count=-1', 'triton,log-frequency=0']);
    engine = await startTestEngine({ modelRepository: repo, traceConfig });
    client = protoLoaderClient(engine.grpcPort);
  });
  afterAll(async () => {
    client?.close();
    await engine?.stop();
    removeDir(repo);
    removeDir(dir);
  });

  it('writes parsable traces with ordered timestamps; ensemble steps point at their parent', async () => {
    await client.call('ModelInfer', { ...echoReq('js_echo', 1), id: 'direct-1' });
    await client.call('ModelInfer', echoReq('ens_echo', 2));
    const traces = read();
    const direct = traces.find((t) => t.request_id === 'direct-1');
    expect(direct).toMatchObject({ model_name: 'js_echo', model_version: 1 });
    for (const t of traces) {
      expect(
        t.timestamps.map((x: { name: string }) => x.name),
        t.model_name,
      ).toEqual(ORDER);
      const ns = t.timestamps.map((x: { ns: number }) => x.ns);
      expect(ns).toEqual([...ns].sort((a, b) => a - b));
    }
    const ens = traces.find((t) => t.model_name === 'ens_echo');
    const steps = traces.filter((t) => t.parent_id === ens.id);
    expect(steps.map((s) => s.model_name)).toEqual(['js_echo', 'js_echo']);
    // Children run inside their parent.
    const at = (t: any, n: string) => t.timestamps.find((x: { name: string }) => x.name === n).ns;
    for (const s of steps) {
      expect(at(s, 'REQUEST_START')).toBeGreaterThanOrEqual(at(ens, 'REQUEST_START'));
      expect(at(s, 'REQUEST_END')).toBeLessThanOrEqual(at(ens, 'REQUEST_END'));
    }
  });

  it('changes level, rate and count at run time, per model, over gRPC and HTTP', async () => {
    const before = read().length;
    // js_echo: off for this model only.
    await client.call('TraceSetting', { model_name: 'js_echo', settings: { trace_level: { value: ['OFF'] } } });
    await client.call('ModelInfer', echoReq('js_echo', 1));
    expect(read().length).toBe(before);
    // Clearing the override falls back to the global settings.
    const cleared = await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/trace/setting', { trace_level: null, trace_rate: '2' });
    expect([cleared.json.trace_level, cleared.json.trace_rate]).toEqual([['TIMESTAMPS'], '2']);
    for (let i = 0; i < 4; i++) await client.call('ModelInfer', echoReq('js_echo', i));
    expect(read().length).toBe(before + 2); // every 2nd request
    // count: one more trace, then none; the setting counts down.
    await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/trace/setting', { trace_rate: '1', trace_count: '1' });
    for (let i = 0; i < 3; i++) await client.call('ModelInfer', echoReq('js_echo', i));
    expect(read().length).toBe(before + 3);
    expect((await httpJson(engine.httpPort, 'GET', '/v2/models/js_echo/trace/setting')).json.trace_count).toBe('0');
    const bad = await httpJson(engine.httpPort, 'POST', '/v2/trace/setting', { trace_level: ['LOUD'] });
    expect(bad.status).toBe(400);
  });

  it('records tensors at level TENSORS', async () => {
    await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/trace/setting', {
      trace_level: ['TIMESTAMPS', 'TENSORS'],
      trace_count: '-1',
    });
    await client.call('ModelInfer', { ...echoReq('js_echo', 42), id: 'tensors-1' });
    const traces = read();
    const id = traces.find((t) => t.request_id === 'tensors-1').id;
    const tensors = traces.filter((t) => t.id === id && t.activity);
    expect(tensors.map((t) => [t.activity, t.tensor.name, t.tensor.data, t.tensor.dtype])).toEqual([
      ['TENSOR_QUEUE_INPUT', 'INPUT0', '42', 'FP32'],
      ['TENSOR_BACKEND_OUTPUT', 'OUTPUT0', '42', 'FP32'],
    ]);
  });
});

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
  service: string;
}

/** A real OTLP/HTTP receiver: collects the spans of JSON exports. */
async function startReceiver(): Promise<{ url: string; spans: OtlpSpan[]; close(): Promise<void> }> {
  const spans: OtlpSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) {
        const service = rs.resource?.attributes?.find((a: { key: string }) => a.key === 'service.name')?.value?.stringValue;
        for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, service });
      }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/v1/traces`, spans, close: () => new Promise((r) => server.close(() => r())) };
}

describe('L0_trace: OpenTelemetry mode, gateway to model', () => {
  let engine: RunningEngine;
  let gw: RunningGateway;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let repo: string;
  let fnDir: string;

  beforeAll(async () => {
    setQuiet(true);
    receiver = await startReceiver();
    repo = writeRepo();
    const traceConfig = traceSettingsFromFlags(['mode=opentelemetry', `opentelemetry,url=${receiver.url}`, 'level=TIMESTAMPS', 'rate=1']);
    engine = await startTestEngine({ modelRepository: repo, traceConfig });
    fnDir = fs.mkdtempSync(path.join(os.tmpdir(), `trace-fn-${process.pid}-`));
    fs.writeFileSync(
      path.join(fnDir, 'echo_twice.json'),
      JSON.stringify({ name: 'echo_twice', target: { model: 'ens_echo' }, inputs: { x: 'X' }, outputs: { y: 'Y' } }),
    );
    gw = await startGateway({
      port: 0,
      host: '127.0.0.1',
      engine: `127.0.0.1:${engine.grpcPort}`,
      functions: fnDir,
      shm: false,
      redisUrl: '',
      otlpTracesUrl: receiver.url,
    });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await engine?.stop();
    await receiver?.close();
    removeDir(repo);
    removeDir(fnDir);
  });

  it('one /fn call gives one trace: gateway span -> ensemble -> each step -> compute, honouring the caller traceparent', async () => {
    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const r = await fetch(`http://127.0.0.1:${gw.port}/fn/echo_twice`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', traceparent: `00-${callerTrace}-${callerSpan}-01` },
      body: JSON.stringify({ inputs: { x: [1, 2, 3] } }),
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).outputs.y.data).toEqual([1, 2, 3]);
    const deadline = Date.now() + 10_000;
    const mine = () => receiver.spans.filter((s) => s.traceId === callerTrace);
    while (Date.now() < deadline && mine().length < 6) await new Promise((res) => setTimeout(res, 100));
    const spans = mine();
    const gwSpan = spans.find((s) => s.service === 'triton-gateway')!;
    expect(gwSpan?.name).toBe('POST /fn/echo_twice');
    expect(gwSpan.parentSpanId).toBe(callerSpan);
    const attr = (s: OtlpSpan, k: string) => s.attributes.find((a) => a.key === k)?.value;
    const infer = spans.filter((s) => s.name === 'InferRequest');
    const ens = infer.find((s) => attr(s, 'triton.model_name')?.stringValue === 'ens_echo')!;
    expect(ens.parentSpanId).toBe(gwSpan.spanId);
    const steps = infer.filter((s) => s.parentSpanId === ens.spanId);
    expect(steps.map((s) => attr(s, 'triton.model_name')?.stringValue)).toEqual(['js_echo', 'js_echo']);
    const computes = spans.filter((s) => s.name === 'compute');
    expect(computes.map((c) => c.parentSpanId).sort()).toEqual(steps.map((s) => s.spanId).sort());
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([callerTrace]));
  });

  it("the engine's HTTP endpoint honours an incoming traceparent header", async () => {
    const callerTrace = '0af7651916cd43dd8448eb211c80319c';
    const callerSpan = 'b7ad6b7169203331';
    const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/js_echo/infer`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', traceparent: `00-${callerTrace}-${callerSpan}-01` },
      body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [4] }] }),
    });
    expect(r.status).toBe(200);
    const deadline = Date.now() + 10_000;
    const infer = () => receiver.spans.filter((s) => s.traceId === callerTrace && s.name === 'InferRequest');
    while (Date.now() < deadline && infer().length < 1) await new Promise((res) => setTimeout(res, 100));
    expect(infer().map((s) => s.parentSpanId)).toEqual([callerSpan]);
  });
});
