// The Hono app through app.request() with a fake engine: routing, the one
// onError, X-Payload-Transfer on every reply, metrics, draining.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { ModelInferRequest, ModelInferResponse } from '../../client/grpc-client.ts';
import { createApp } from '../../gateway/app.ts';
import type { EngineApi } from '../../gateway/upstream/engine-client.ts';
import { gatewayError } from '../../gateway/core/errors.ts';
import { FunctionRegistry } from '../../gateway/calls/function-registry.ts';
import { FunctionDefinitionSchema } from '../../gateway/calls/function-schema.ts';
import { MemoryLeaseStore } from '../../gateway/staging/memory-lease-store.ts';
import { GatewayMetrics } from '../../gateway/core/metrics.ts';

/** A fake engine serving `double` (ensemble, FP32 [-1] -> FP32 [-1]) and `sum` (INT32 [-1] -> INT32 [1]). */
function fakeEngine(behaviour: { fail?: () => Error; delayMs?: number } = {}) {
  const md = {
    double: {
      name: 'double',
      versions: ['1'],
      platform: 'ensemble',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [-1] }],
      outputs: [{ name: 'Y', datatype: 'FP32', shape: [-1] }],
    },
    sum: {
      name: 'sum',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'A', datatype: 'INT32', shape: [-1] }],
      outputs: [
        { name: 'S', datatype: 'INT32', shape: [1] },
        { name: 'N', datatype: 'INT32', shape: [1] },
      ],
    },
  } as const;
  const seen: ModelInferRequest[] = [];
  const e = Object.assign(new EventEmitter(), {
    address: 'fake:1',
    up: true,
    async infer(req: ModelInferRequest): Promise<ModelInferResponse> {
      seen.push(req);
      if (behaviour.delayMs) await new Promise((r) => setTimeout(r, behaviour.delayMs));
      if (behaviour.fail) throw behaviour.fail();
      const raw = Buffer.from(req.raw_input_contents![0]!);
      if (req.model_name === 'double') {
        const x = new Float32Array(Uint8Array.from(raw).buffer).map((v) => v * 2);
        return {
          model_name: 'double',
          model_version: '1',
          id: req.id ?? '',
          outputs: [{ name: 'Y', datatype: 'FP32', shape: [x.length] }],
          raw_output_contents: [Buffer.from(x.buffer)],
        };
      }
      const a = new Int32Array(Uint8Array.from(raw).buffer);
      const wanted = (req.outputs ?? []).map((o) => o.name);
      const all = {
        S: Buffer.from(new Int32Array([a.reduce((p, q) => p + q, 0)]).buffer),
        N: Buffer.from(new Int32Array([a.length]).buffer),
      };
      const names = wanted.length ? wanted : ['S', 'N'];
      return {
        model_name: 'sum',
        model_version: '1',
        id: '',
        outputs: names.map((n) => ({ name: n, datatype: 'INT32', shape: [1] })),
        raw_output_contents: names.map((n) => all[n as 'S' | 'N']),
      };
    },
    async modelMetadata(name: string) {
      const m = md[name as keyof typeof md];
      if (!m) throw gatewayError('FUNCTION_UNAVAILABLE', { name, model: name });
      return m as unknown as Awaited<ReturnType<EngineApi['modelMetadata']>>;
    },
    async listModels() {
      return Object.keys(md).map((name) => ({ name, version: '1', state: 'READY', reason: '' }));
    },
    async registerRegion() {},
    async unregisterRegion() {},
    async regionStatus() {
      return {};
    },
    async check() {
      return e.up;
    },
    close() {},
  });
  return { engine: e as unknown as EngineApi & { up: boolean }, seen };
}

function build(behaviour?: Parameters<typeof fakeEngine>[0]) {
  const { engine, seen } = fakeEngine(behaviour);
  const defs = [
    FunctionDefinitionSchema.parse({
      name: 'adder',
      target: { model: 'sum' },
      inputs: { values: 'A' },
      outputs: { total: 'S', count: 'N' },
      limits: { maxBodyBytes: 100 },
    }),
  ];
  const registry = new FunctionRegistry(engine, defs);
  const store = new MemoryLeaseStore();
  const metrics = new GatewayMetrics({ engineUp: () => engine.up, storeUp: () => true });
  const gw = createApp({ registry, engine, store, metrics, shmThreshold: 65536 });
  return { ...gw, engine, seen };
}

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: 'POST',
  body: JSON.stringify(body),
  headers: { 'Content-Type': 'application/json', ...headers },
});

describe('gateway app', () => {
  it('serves an implicit ensemble and a defined function with renames', async () => {
    const { app, seen } = build();
    const r = await app.request('/fn/double', json({ inputs: { X: [1, 2.5] } }));
    expect(r.status).toBe(200);
    expect(r.headers.get('x-payload-transfer')).toBe('inline');
    expect(await r.json()).toEqual({ outputs: { Y: { shape: [2], datatype: 'FP32', data: [2, 5] } } });
    const a = await app.request('/fn/adder', json({ inputs: { values: [1, 2, 3] }, outputs: ['total'] }));
    expect(await a.json()).toEqual({ outputs: { total: { shape: [1], datatype: 'INT32', data: [6] } } });
    expect(seen[1]!.outputs).toEqual([{ name: 'S' }]);
    expect(seen[1]!.inputs[0]).toMatchObject({ name: 'A', datatype: 'INT32', shape: [3] });
  });

  it('answers every error from the catalog with X-Payload-Transfer', async () => {
    const { app } = build();
    const cases: Array<[string, RequestInit, number, string]> = [
      ['/fn/nope', json({ inputs: {} }), 404, 'FUNCTION_NOT_FOUND'],
      ['/fn/adder', json({ inputs: { values: [1] }, outputs: ['zz'] }), 400, 'OUTPUT_UNKNOWN'],
      ['/fn/adder', { method: 'POST', body: '{"inputs":', headers: { 'Content-Type': 'application/json' } }, 400, 'BODY_INVALID'],
      ['/fn/adder', { method: 'POST', body: 'x', headers: { 'Content-Type': 'text/plain' } }, 415, 'MEDIA_TYPE_UNSUPPORTED'],
      ['/fn/adder', json({ inputs: { values: new Array(60).fill(1) } }), 413, 'BODY_TOO_LARGE'],
      ['/fn/adder', json({ inputs: { values: [1] } }, { Accept: 'application/octet-stream' }), 406, 'OUTPUT_NOT_ACCEPTABLE'],
      ['/nowhere', { method: 'GET' }, 404, 'ROUTE_NOT_FOUND'],
    ];
    for (const [p, init, status, code] of cases) {
      const r = await app.request(p, init);
      expect(r.status, `${p} ${code}`).toBe(status);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe(code);
      if (p.startsWith('/fn/')) expect(r.headers.get('x-payload-transfer')).toBe('inline');
    }
  });

  it('returns one output as raw bytes', async () => {
    const { app } = build();
    const r = await app.request('/fn/adder?output=count', json({ inputs: { values: [4, 5] } }, { Accept: 'application/octet-stream' }));
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/octet-stream');
    expect(r.headers.get('x-output-name')).toBe('count');
    expect(Buffer.from(await r.arrayBuffer()).readInt32LE(0)).toBe(2);
  });

  it('passes engine errors through and counts calls in metrics', async () => {
    const { app, engine } = build({ fail: () => gatewayError('ENGINE_TIMEOUT', { name: 'double', timeoutMs: 5 }) });
    const r = await app.request('/fn/double', json({ inputs: { X: [1] } }));
    expect(r.status).toBe(504);
    const m = await (await app.request('/metrics')).text();
    expect(m).toMatch(/gateway_function_calls_total\{function="double",code="504",transfer="inline"\} 1/);
    expect(m).toMatch(/gateway_engine_up 1/);
    engine.up = false;
    expect((await app.request('/readyz')).status).toBe(503);
  });

  it('GET /fn lists functions; drain refuses new calls and waits for in-flight ones', async () => {
    const { app, drain, inflight } = build({ delayMs: 100 });
    const list = (await (await app.request('/fn')).json()) as { functions: Array<{ name: string }> };
    expect(list.functions.map((f) => f.name)).toEqual(['adder', 'double']);
    const pending = app.request('/fn/double', json({ inputs: { X: [1] } }));
    await new Promise((r) => setTimeout(r, 20));
    expect(inflight()).toBe(1);
    const drained = drain(5000);
    const refused = await app.request('/fn/double', json({ inputs: { X: [1] } }));
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('GATEWAY_SHUTTING_DOWN');
    await drained;
    expect((await pending).status).toBe(200);
    expect(inflight()).toBe(0);
  });
});
