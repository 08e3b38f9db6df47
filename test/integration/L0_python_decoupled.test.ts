// Decoupled python models on real stubs, after Triton's L0_backend_python
// decoupled, async_execute and bls suites and its bls_decoupled example: an
// async execute's background tasks send after it returned; the instance takes
// the next request as soon as execute returns (one long stream does not hold
// it); BLS on a decoupled model yields every response (exec and async_exec
// with decoupled=True); a client's cancellation (gRPC stream closed, gRPC
// deadline, HTTP client gone) turns the model's request.is_cancelled() true.
// The cases run at the same time: each has models of its own, or shares one
// only where the model runs requests concurrently (async_wait).
import { describe, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { f32Bytes, grpcError, i32Bytes, toI32, type ProtoClient } from './helpers.ts';
import { pythonRepo, pythonEngine } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { MODELS } from './python-decoupled-models.ts';

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;

type StreamMsg = {
  error_message: string;
  infer_response: { id: string; raw_output_contents: Buffer[]; parameters?: Record<string, { bool_param?: boolean }> };
};
/** `at`: ms since the stream opened; `abs`: Date.now() on arrival. */
type Arrival = { id: string; value?: number; error?: string; at: number; abs: number };

/** Send `requests` on one ModelStreamInfer stream and collect every message, with its arrival time. */
function stream(requests: object[]): Promise<Arrival[]> {
  const t0 = Date.now();
  const got: Arrival[] = [];
  return new Promise((resolve, reject) => {
    const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, StreamMsg>;
    call.on('data', (m) => {
      const raw = m.infer_response.raw_output_contents?.[0];
      got.push({
        id: m.infer_response.id,
        at: Date.now() - t0,
        abs: Date.now(),
        ...(m.error_message ? { error: m.error_message } : { value: raw ? toI32(raw)[0] : undefined }),
      });
    });
    call.on('error', reject);
    call.on('end', () => resolve(got));
    for (const r of requests) call.write(r);
    call.end();
  });
}

const intReq = (model: string, id: string, name: string, v: number) => ({
  model_name: model,
  id,
  inputs: [{ name, datatype: 'INT32', shape: [1] }],
  raw_input_contents: [i32Bytes([v])],
});
const waitReq = (model: string, id: string, secs: number) => ({
  model_name: model,
  id,
  inputs: [{ name: 'WAIT_SECONDS', datatype: 'FP32', shape: [1] }],
  raw_input_contents: [f32Bytes([secs])],
});

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return cond();
}

async function untilAsync(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return cond();
}

/** The model's failed-request count (statistics extension). */
const failures = async (model: string) =>
  Number((await client.call('ModelStatistics', { name: model })).model_stats[0].inference_stats.fail.count);

const marker = (model: string, id: string) => path.join(repo, model, `cancelled-${id}`);

pythonEngine(
  () => pythonRepo('l0-pydecoupled', [], MODELS),
  (s) => ({ repo, eng, client } = s),
  { controlMode: 'explicit', loadModels: ['*'] },
);

describe('L0_python_decoupled', () => {
  it.concurrent('async execute: tasks it starts with asyncio.create_task send their responses after it returned', async ({ expect }) => {
    const got = await stream([intReq('async_tasks', 'a', 'IN', 3), intReq('async_tasks', 'b', 'IN', 1)]);
    expect(got.filter((g) => g.id === 'a').map((g) => g.value)).toEqual([0, 1, 2]);
    expect(got.filter((g) => g.id === 'b').map((g) => g.value)).toEqual([0]);
  }, 20_000);

  it.concurrent('async execute of a decoupled model runs in the background: 3 requests of 1 s on one instance take about 1 s', async ({
    expect,
  }) => {
    const t0 = Date.now();
    const got = await stream([waitReq('async_wait', 'x', 1), waitReq('async_wait', 'y', 1), waitReq('async_wait', 'z', 1)]);
    const took = Date.now() - t0;
    expect(got.map((g) => g.id).sort()).toEqual(['x', 'y', 'z']);
    expect(got.every((g) => g.error === undefined)).toBe(true);
    expect(took).toBeLessThan(2500); // one after another: 3 s
  }, 20_000);

  it.concurrent("a shorter request on the same instance answers first (Triton's concurrent async execute)", async ({ expect }) => {
    const got = await stream([waitReq('async_wait', 'long', 1.5), waitReq('async_wait', 'short', 0.2)]);
    expect(got.map((g) => g.id)).toEqual(['short', 'long']);
  }, 20_000);

  it.concurrent('an exception in a background async execute ends its request with the error', async ({ expect }) => {
    const got = await stream([waitReq('async_wait', 'neg', -1)]);
    expect(got).toHaveLength(1);
    expect(got[0]!.error).toContain('wait_secs cannot be negative');
  }, 20_000);

  it.concurrent('a decoupled instance is free once execute returns: a second request streams while a long one is still open', async ({
    expect,
  }) => {
    const [long, short] = await Promise.all([
      stream([intReq('slow_stream', 'long', 'IN', 6)]),
      new Promise((r) => setTimeout(r, 150)).then(() => stream([intReq('slow_stream', 'short', 'IN', 1)])),
    ]);
    expect(long.map((g) => g.value)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(short.map((g) => g.value)).toEqual([0]);
    // The long stream sends every 200 ms for 1 s, then its final flag; the short one
    // (started 150 ms in) answers before the long one's fifth response, not after its end.
    expect(short[0]!.abs).toBeLessThan(long[4]!.abs);
  }, 20_000);

  it.concurrent('BLS exec(decoupled=True) iterates every response of a decoupled model, the last one final and empty', async ({
    expect,
  }) => {
    for (const n of [4, 2, 0, 1]) {
      const res = await client.call('ModelInfer', intReq('bls_decoupled_sync', '', 'IN', n));
      const [sum, count] = [toI32(res.raw_output_contents[0])[0], toI32(res.raw_output_contents[1])[0]];
      expect({ n, sum, count }).toEqual({ n, sum: n * n, count: n + 1 });
    }
  }, 30_000);

  it.concurrent('BLS async_exec(decoupled=True): awaited together, iterated with for and async for', async ({ expect }) => {
    for (const n of [4, 0, 3]) {
      const res = await client.call('ModelInfer', intReq('bls_decoupled_async', '', 'IN', n));
      expect(toI32(res.raw_output_contents[0])[0]).toBe(2 * n * n);
    }
  }, 30_000);

  it.concurrent("a BLS response iterator's cancel() reaches the called model, whose CANCELLED error ends the stream", async ({
    expect,
  }) => {
    const t0 = Date.now();
    const res = await client.call('ModelInfer', intReq('bls_cancel', '', 'IN', 5));
    expect(toI32(res.raw_output_contents[0])[0]).toBe(5);
    expect(toI32(res.raw_output_contents[1])[0]).toBe(1); // CANCELLED seen
    expect(Date.now() - t0).toBeLessThan(3000); // not the 200 responses (4 s)
  }, 20_000);

  it.concurrent("a plain BLS exec() on a decoupled model gets Triton's refusal", async ({ expect }) => {
    const e = await grpcError(client.call('ModelInfer', intReq('bls_decoupled_sync', '', 'IN', -1)));
    expect(e.details).toContain(
      "Model square_int32 is using the decoupled. The current BLS request call doesn't support models using the decoupled transaction policy. Please use 'decoupled=True' argument",
    );
  }, 20_000);

  it.concurrent("a decoupled execute that returns responses gets Triton's refusal on the stream", async ({ expect }) => {
    const got = await stream([intReq('returns_list', 'r', 'IN', 0)]);
    expect(got).toHaveLength(1);
    expect(got[0]!.error).toBe("Python model 'returns_list_0_0' is using the decoupled mode and the execute function must return None.");
  }, 20_000);

  it.concurrent('closing the gRPC stream cancels its request: the decoupled model sees request.is_cancelled()', async ({ expect }) => {
    const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, StreamMsg>;
    call.on('error', () => undefined);
    const first = new Promise<void>((r) => call.once('data', () => r()));
    call.write(intReq('cancel_watch', 'g1', 'IN', 0));
    await first; // the model is running
    expect(existsSync(marker('cancel_watch', 'g1'))).toBe(false);
    call.cancel();
    expect(await until(() => existsSync(marker('cancel_watch', 'g1')), 5000)).toBe(true);
    // Counted as a failed request once its stream ended.
    expect(await untilAsync(async () => (await failures('cancel_watch')) === 1, 5000)).toBe(true);
  }, 20_000);

  it.concurrent("the HTTP client going away and a gRPC deadline cancel a plain python model's request", async ({ expect }) => {
    const ac = new AbortController();
    const sent = fetch(`http://127.0.0.1:${eng.httpPort}/v2/models/cancel_plain/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'h1', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [0] }] }),
      signal: ac.signal,
    }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 400));
    expect(existsSync(marker('cancel_plain', 'h1'))).toBe(false);
    ac.abort();
    await sent;
    expect(await until(() => existsSync(marker('cancel_plain', 'h1')), 5000)).toBe(true);

    const e = await grpcError(client.call('ModelInfer', intReq('cancel_plain', 'd1', 'IN', 0), 400));
    expect(e.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(await until(() => existsSync(marker('cancel_plain', 'd1')), 5000)).toBe(true);
    expect(await untilAsync(async () => (await failures('cancel_plain')) === 2, 5000)).toBe(true);
  }, 30_000);
});
