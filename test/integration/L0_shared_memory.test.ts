// System shared memory over gRPC on the real engine, with a client built only
// from the .proto files and client/shared-memory.ts, calling the RPCs the way
// Triton's Python client does: the seed's clip_encoder_model flow, outputs
// into a client region, every shm error Triton reports, truncation (also under
// a worker thread's mapping), unregister mid-request, the in-place (zero-copy)
// read, and no leak in /dev/shm or in mappings after each test.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { ElemType, GraphBuilder } from '../../model_repository/onnx-builder.ts';
import { liveMappings, shmOpen, shmClose, shmTruncate } from '../../native/index.ts';
import {
  createSharedMemoryRegion,
  destroySharedMemoryRegion,
  getContents,
  listSharedMemoryKeys,
  setSharedMemoryRegion,
  type ShmRegionHandle,
} from '../../client/shared-memory.ts';
import {
  f32Bytes,
  grpcError,
  maxAbsDiff,
  protoLoaderClient,
  removeDir,
  seededFloats,
  startTestEngine,
  tempRepo,
  toF32,
  toI32,
  type ProtoClient,
} from './helpers.ts';

const CLIP = 'clip_encoder_model';
const PIXELS = 3 * 224 * 224;
const EMBED = 512;
const SUFFIX = `_${process.pid}`;
const LATE_N = 4096;

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;
let baseMappings: number;
const open: ShmRegionHandle[] = [];

/**
 * late_reader: y = ReduceSum(b * (0*chain(a) + 1)) over axis 1. `b` is read only
 * after a ~128-MatMul chain on `a` (a data dependency ORT cannot reorder), so a
 * test can change or truncate b's region while the model runs.
 */
function writeLateReader(dir: string): void {
  const g = new GraphBuilder('late_reader', 7);
  g.input('a', ElemType.FLOAT, ['batch', 1]);
  g.input('b', ElemType.FLOAT, ['batch', 'n']);
  let h = g.node('Mul', [g.node('Reshape', ['a', g.constInt64('shape', [-1, 1, 1])]), g.randomWeight('c', [512, 512], 3)]);
  const w = g.randomWeight('w', [512, 512], 512, Math.SQRT1_2);
  for (let i = 0; i < 128; i++) h = g.node('Tanh', [g.node('MatMul', [h, w])]);
  const col = g.node('Unsqueeze', [g.node('ReduceMean', [h], { axes: [1, 2], keepdims: 0 }), g.constInt64('axes', [1])]);
  const one = g.node('Add', [g.node('Mul', [col, g.constFloat('zero', [], [0])]), g.constFloat('one', [], [1])]);
  g.node('ReduceSum', [g.node('Mul', ['b', one]), g.constInt64('sum_axes', [1])], { keepdims: 1 }, 'y');
  g.output('y', ElemType.FLOAT, ['batch', 1]);
  mkdirSync(path.join(dir, 'late_reader', '1'), { recursive: true });
  writeFileSync(path.join(dir, 'late_reader', '1', 'model.onnx'), g.build());
  writeFileSync(
    path.join(dir, 'late_reader', 'config.pbtxt'),
    `name: "late_reader"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "a", data_type: TYPE_FP32, dims: [ -1, 1 ] }, { name: "b", data_type: TYPE_FP32, dims: [ -1, -1 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ -1, 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
`,
  );
}

/** The InferParameter map Triton's Python client sends for set_shared_memory(region, byte_size, offset). */
function shmParams(region: string, byteSize: number, offset = 0): Record<string, object> {
  const p: Record<string, object> = {
    shared_memory_region: { string_param: region },
    shared_memory_byte_size: { int64_param: byteSize },
  };
  if (offset !== 0) p.shared_memory_offset = { int64_param: offset };
  return p;
}

/** create_shared_memory_region + register_system_shared_memory. */
async function createAndRegister(name: string, key: string, byteSize: number): Promise<ShmRegionHandle> {
  const h = createSharedMemoryRegion(name, key, byteSize);
  open.push(h);
  await client.call('SystemSharedMemoryRegister', { name, key, offset: 0, byte_size: byteSize });
  return h;
}

function destroy(h: ShmRegionHandle): void {
  const i = open.indexOf(h);
  if (i >= 0) open.splice(i, 1);
  destroySharedMemoryRegion(h);
}

const clipInput = (shape: number[], parameters?: object) => ({
  name: 'pixel_values',
  datatype: 'FP32',
  shape,
  ...(parameters ? { parameters } : {}),
});
const ourKeys = () => listSharedMemoryKeys('/').filter((k) => k.endsWith(SUFFIX));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Worker threads drop mappings on a message: wait until the process-wide count is back. */
async function mappingsSettle(want: number): Promise<number> {
  for (let i = 0; i < 50 && liveMappings() !== want; i++) await sleep(20);
  return liveMappings();
}

async function rawClip(pixels: Float32Array): Promise<Float32Array> {
  const res = await client.call('ModelInfer', {
    model_name: CLIP,
    inputs: [clipInput([1, 3, 224, 224])],
    raw_input_contents: [f32Bytes(pixels)],
  });
  return toF32(res.raw_output_contents[0]);
}

beforeAll(async () => {
  repo = tempRepo('l0-shm', ['simple', 'slow_model'], [CLIP]);
  writeLateReader(repo);
  engine = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(engine.grpcPort);
  baseMappings = liveMappings();
});

afterEach(async () => {
  for (const h of open.splice(0)) destroySharedMemoryRegion(h);
  await client.call('SystemSharedMemoryUnregister', { name: '' });
  // No leak: no object of ours under /dev/shm, no mapping left in any thread.
  expect(ourKeys()).toEqual([]);
  expect(await mappingsSettle(baseMappings)).toBe(baseMappings);
});

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
});

describe('L0_shared_memory: the seed flow over gRPC', () => {
  it('infers clip_encoder_model from /input_shm, into output_shm, same as raw_input_contents', async () => {
    const pixels = seededFloats(PIXELS, 42, -2, 2);
    const inBytes = PIXELS * 4;
    const outBytes = EMBED * 4;
    const want = await rawClip(pixels);

    // shm.create_shared_memory_region + set_shared_memory_region, then register.
    const ip = createSharedMemoryRegion('input_shm', `/input_shm${SUFFIX}`, inBytes);
    const op = createSharedMemoryRegion('output_shm', `/output_shm${SUFFIX}`, outBytes);
    open.push(ip, op);
    setSharedMemoryRegion(ip, [pixels]);
    await client.call('SystemSharedMemoryUnregister', { name: '' });
    await client.call('SystemSharedMemoryRegister', { name: 'input_shm', key: `/input_shm${SUFFIX}`, offset: 0, byte_size: inBytes });
    await client.call('SystemSharedMemoryRegister', { name: 'output_shm', key: `/output_shm${SUFFIX}`, offset: 0, byte_size: outBytes });
    const status = await client.call('SystemSharedMemoryStatus', { name: '' });
    expect(Object.keys(status.regions).sort()).toEqual(['input_shm', 'output_shm']);
    expect(status.regions.input_shm).toMatchObject({
      name: 'input_shm',
      key: `/input_shm${SUFFIX}`,
      offset: '0',
      byte_size: String(inBytes),
    });

    // Input in the region, output returned normally.
    const plain = await client.call('ModelInfer', {
      model_name: CLIP,
      inputs: [clipInput([1, 3, 224, 224], shmParams('input_shm', inBytes))],
    });
    expect(plain.outputs[0]).toMatchObject({ name: 'image_embeds', datatype: 'FP32', shape: ['1', String(EMBED)] });
    expect(maxAbsDiff(toF32(plain.raw_output_contents[0]), want)).toBeLessThan(1e-5);

    // Input and output in regions: the response carries no bytes for the output.
    const res = await client.call('ModelInfer', {
      model_name: CLIP,
      inputs: [clipInput([1, 3, 224, 224], shmParams('input_shm', inBytes))],
      outputs: [{ name: 'image_embeds', parameters: shmParams('output_shm', outBytes) }],
    });
    expect(res.outputs[0].name).toBe('image_embeds');
    expect(res.outputs[0].shape).toEqual(['1', String(EMBED)]);
    expect(res.outputs[0].parameters.shared_memory_region.string_param).toBe('output_shm');
    expect(res.raw_output_contents.every((b: Uint8Array) => b.byteLength === 0)).toBe(true);
    const got = getContents(op, 'FP32', [1, EMBED]) as Float32Array;
    expect(maxAbsDiff(got, want)).toBeLessThan(1e-5);

    // unregister_system_shared_memory(), destroy_shared_memory_region: nothing left.
    await client.call('SystemSharedMemoryUnregister', { name: '' });
    expect((await client.call('SystemSharedMemoryStatus', { name: '' })).regions).toEqual({});
    destroy(ip);
    destroy(op);
    expect(ourKeys()).toEqual([]);
  });

  it('reads a tensor at an offset inside a larger region', async () => {
    const pixels = seededFloats(PIXELS, 7, -1, 1);
    const h = await createAndRegister('big_shm', `/big_shm${SUFFIX}`, 4096 + PIXELS * 4);
    setSharedMemoryRegion(h, [pixels], 4096);
    const res = await client.call('ModelInfer', {
      model_name: CLIP,
      inputs: [clipInput([1, 3, 224, 224], shmParams('big_shm', PIXELS * 4, 4096))],
    });
    expect(maxAbsDiff(toF32(res.raw_output_contents[0]), await rawClip(pixels))).toBeLessThan(1e-5);
  });
});

describe('L0_shared_memory: errors', () => {
  it('rejects a duplicate name, an oversize register and a missing object', async () => {
    await createAndRegister('dup', `/dup${SUFFIX}`, 1024);
    let e = await grpcError(client.call('SystemSharedMemoryRegister', { name: 'dup', key: `/dup${SUFFIX}`, offset: 0, byte_size: 1024 }));
    expect(e.code).toBe(grpc.status.ALREADY_EXISTS);
    expect(e.details).toContain("'dup'");
    e = await grpcError(client.call('SystemSharedMemoryRegister', { name: 'over', key: `/dup${SUFFIX}`, offset: 512, byte_size: 1024 }));
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.details).toBe("failed to register shared memory region 'over': invalid args"); // Triton's words
    e = await grpcError(client.call('SystemSharedMemoryRegister', { name: 'none', key: `/no_such${SUFFIX}`, offset: 0, byte_size: 8 }));
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT); // the client's mistake, not a server fault
    expect(e.details).toBe(`Unable to open shared memory region: '/no_such${SUFFIX}'`);
    e = await grpcError(client.call('SystemSharedMemoryStatus', { name: 'none' }));
    expect(e.code).toBe(grpc.status.NOT_FOUND);
    // Unknown name: unregister succeeds, as in Triton.
    await client.call('SystemSharedMemoryUnregister', { name: 'never_registered' });
  });

  it('rejects bad tensor parameters naming the tensor (INVALID_ARG; an unknown region NOT_FOUND)', async () => {
    await createAndRegister('small', `/small${SUFFIX}`, PIXELS * 4);
    const infer = (parameters: object, outputs?: object[]) =>
      grpcError(
        client.call('ModelInfer', { model_name: CLIP, inputs: [clipInput([1, 3, 224, 224], parameters)], ...(outputs ? { outputs } : {}) }),
      );

    let e = await infer(shmParams('small', PIXELS * 4, 4));
    expect([e.code, e.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      expect.stringMatching(/^Invalid offset( \+ byte size)? for shared memory region: '.*' \(input 'pixel_values'\)$/),
    ]);
    e = await infer({ shared_memory_offset: { int64_param: 0 }, shared_memory_byte_size: { int64_param: 4 } });
    expect([e.code, e.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      expect.stringContaining("only be given with 'shared_memory_region'"),
    ]);
    e = await infer({ shared_memory_region: { string_param: 'small' } });
    expect([e.code, e.details]).toEqual([grpc.status.INVALID_ARGUMENT, expect.stringContaining("'shared_memory_byte_size' must be given")]);
    e = await infer(shmParams('nowhere', PIXELS * 4));
    expect([e.code, e.details]).toEqual([grpc.status.NOT_FOUND, "Unable to find shared memory region: 'nowhere' (input 'pixel_values')"]); // Triton's code

    // Output region too small for [1, 512] FP32.
    await createAndRegister('out_small', `/out_small${SUFFIX}`, 1024);
    e = await infer(shmParams('small', PIXELS * 4), [{ name: 'image_embeds', parameters: shmParams('out_small', 1024) }]);
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.details).toContain(`output 'image_embeds' should be at least ${EMBED * 4} bytes`);
  });

  it('answers a truncated region with INVALID_ARG and keeps serving', async () => {
    const h = await createAndRegister('trunc', `/trunc${SUFFIX}`, PIXELS * 4);
    const pixels = seededFloats(PIXELS, 3);
    setSharedMemoryRegion(h, [pixels]);
    const req = { model_name: CLIP, inputs: [clipInput([1, 3, 224, 224], shmParams('trunc', PIXELS * 4))] };
    await client.call('ModelInfer', req); // the worker now holds its own mapping of the region
    const fd = shmOpen(h.key);
    try {
      shmTruncate(fd, 4096);
    } finally {
      shmClose(fd);
    }
    const e = await grpcError(client.call('ModelInfer', req));
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.details).toMatch(/'trunc'.*truncated to 4096 bytes/);
    expect(await client.call('ServerLive', {})).toEqual({ live: true });
    expect(await rawClip(pixels)).toHaveLength(EMBED);
  });

  it('survives a truncation while the worker thread reads its mapping (SIGBUS guard), with an error', async () => {
    const bytes = LATE_N * 4;
    const h = await createAndRegister('late', `/late${SUFFIX}`, bytes);
    setSharedMemoryRegion(h, [new Float32Array(LATE_N).fill(1)]);
    const req = {
      model_name: 'late_reader',
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [1, 1] },
        { name: 'b', datatype: 'FP32', shape: [1, LATE_N], parameters: shmParams('late', bytes) },
      ],
      raw_input_contents: [f32Bytes([0.5])],
    };
    const t0 = performance.now();
    const ok = await client.call('ModelInfer', req);
    const runMs = performance.now() - t0;
    expect(toF32(ok.raw_output_contents[0])[0]).toBe(LATE_N);
    expect(runMs).toBeGreaterThan(60); // the window below must fall inside the run

    // Truncate to zero while the chain runs: b's pages vanish under the worker's mapping.
    const pending = grpcError(client.call('ModelInfer', req));
    await sleep(Math.min(30, runMs / 4));
    const fd = shmOpen(h.key);
    try {
      shmTruncate(fd, 0);
    } finally {
      shmClose(fd);
    }
    const e = await pending;
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    // The worker's mapping faulted mid-run; the guard gave it zero pages and the worker refused the result.
    expect(e.details).toContain(`'/late${SUFFIX}' shrank while the model read it`);
    // This process (the engine's) is alive and serves the next request.
    expect(await client.call('ServerLive', {})).toEqual({ live: true });
    const again = await grpcError(client.call('ModelInfer', req));
    expect(again.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(again.details).toContain('truncated to 0 bytes');
  });
});

describe('L0_shared_memory: in place and in flight', () => {
  it('reads the region in place: bytes written after the request was sent are the ones used', async () => {
    const bytes = LATE_N * 4;
    const h = await createAndRegister('inplace', `/inplace${SUFFIX}`, bytes);
    const b = getContents(h, 'FP32', [LATE_N]) as Float32Array;
    const req = {
      model_name: 'late_reader',
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [1, 1] },
        { name: 'b', datatype: 'FP32', shape: [1, LATE_N], parameters: shmParams('inplace', bytes) },
      ],
      raw_input_contents: [f32Bytes([0.25])],
    };
    b.fill(1);
    expect(toF32((await client.call('ModelInfer', req)).raw_output_contents[0])[0]).toBe(LATE_N); // warm
    const t0 = performance.now();
    expect(toF32((await client.call('ModelInfer', req)).raw_output_contents[0])[0]).toBe(LATE_N);
    const runMs = performance.now() - t0;
    const mapped = liveMappings();

    // Send with b = 1, then write b = 2 while the MatMul chain runs, before ORT reads b.
    // A copy made when the request was received or dispatched would still sum to N.
    b.fill(1);
    const pending = client.call('ModelInfer', req);
    await sleep(Math.min(30, runMs / 4));
    const wroteAt = performance.now();
    b.fill(2);
    const res = await pending;
    // The write landed mid-run (a copy at receipt or dispatch would be done by then).
    expect(performance.now() - wroteAt).toBeGreaterThan(runMs / 4);
    expect(toF32(res.raw_output_contents[0])[0]).toBe(2 * LATE_N);

    // The worker maps the region once and reuses it: no new mapping per request.
    for (let i = 0; i < 3; i++) await client.call('ModelInfer', req);
    expect(liveMappings()).toBe(mapped);
  });

  it('clip_encoder_model: each instance maps the region once, not per request', async () => {
    const h = await createAndRegister('zc', `/zc${SUFFIX}`, PIXELS * 4);
    setSharedMemoryRegion(h, [seededFloats(PIXELS, 9)]);
    const before = liveMappings();
    const req = { model_name: CLIP, inputs: [clipInput([1, 3, 224, 224], shmParams('zc', PIXELS * 4))] };
    for (let i = 0; i < 4; i++) await client.call('ModelInfer', req);
    const mapped = liveMappings();
    expect(mapped - before).toBeGreaterThanOrEqual(1); // a worker's own mapping (at most one per instance)
    expect(mapped - before).toBeLessThanOrEqual(2);
    for (let i = 0; i < 8; i++) await client.call('ModelInfer', req);
    expect(liveMappings()).toBe(mapped);
  });

  it('unregister while a request reads the region: listed until the request completes, then it and the mapping go', async () => {
    const h = await createAndRegister('mid', `/mid${SUFFIX}`, 4);
    setSharedMemoryRegion(h, [Float32Array.of(0.75)]);
    // The same input sent raw, on slow_model's other instance meanwhile: what the shm request must answer.
    const want = client
      .call('ModelInfer', {
        model_name: 'slow_model',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1] }],
        raw_input_contents: [f32Bytes([0.75])],
      })
      .then((r) => toF32(r.raw_output_contents[0]));
    const pending = client.call('ModelInfer', {
      model_name: 'slow_model',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], parameters: shmParams('mid', 4) }],
    });
    await sleep(20);
    await client.call('SystemSharedMemoryUnregister', { name: 'mid' });
    // As Triton: in use, so still listed; gone once the request ends, with no second unregister.
    expect(Object.keys((await client.call('SystemSharedMemoryStatus', { name: '' })).regions)).toEqual(['mid']);
    const res = await pending;
    expect(toF32(res.raw_output_contents[0])).toEqual(await want);
    expect((await client.call('SystemSharedMemoryStatus', { name: '' })).regions).toEqual({});
    destroy(h);
    // afterEach checks every mapping (engine's and worker's) is gone.
  });

  it('reads the registered object even after the client replaced its key (unlink + create)', async () => {
    const api = engine.engine;
    const ones = new Uint8Array(new Int32Array(16).fill(1).buffer);
    const run = async () => {
      const res = await api.infer({
        modelName: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Uint8Array(0), shm: { region: 'swap', offset: 0, byteSize: 64 } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: ones },
        ],
        outputs: [{ name: 'OUTPUT0' }],
        parameters: {},
      });
      return Array.from(toI32(res.outputs[0]!.data));
    };
    const first = await createAndRegister('swap', `/swap${SUFFIX}`, 64);
    setSharedMemoryRegion(first, [new Int32Array(16).fill(10)]);
    // Replace the key before any worker has mapped the region.
    destroy(first);
    const second = createSharedMemoryRegion('swap', `/swap${SUFFIX}`, 64);
    open.push(second);
    setSharedMemoryRegion(second, [new Int32Array(16).fill(20)]);
    // Triton maps at registration: the registered object is the one read, by every thread.
    expect(await run()).toEqual(Array(16).fill(11));
    expect(await run()).toEqual(Array(16).fill(11));
  });

  it('unregister in the same breath as the infer (worker gets run + forget together): completes', async () => {
    // Through the engine's ServerApi, the call both frontends make: over a socket the
    // two rarely land in one worker turn, but they can, and then the old worker unmapped
    // the region under the pending session.run ("expected 64, got 0").
    const api = engine.engine;
    const ones = new Uint8Array(new Int32Array(16).fill(1).buffer);
    for (let i = 0; i < 12; i++) {
      const h = await createAndRegister('race', `/race${SUFFIX}`, 64);
      setSharedMemoryRegion(h, [Int32Array.from({ length: 16 }, (_, j) => j * i)]);
      const pending = api.infer({
        modelName: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Uint8Array(0), shm: { region: 'race', offset: 0, byteSize: 64 } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: ones },
        ],
        outputs: [{ name: 'OUTPUT0' }],
        parameters: {},
      });
      for (let k = 0; k < i % 6; k++) await Promise.resolve();
      if (i >= 6) await new Promise((r) => setImmediate(r));
      api.shmUnregister('race');
      const res = await pending;
      expect(Array.from(toI32(res.outputs[0]!.data))).toEqual(Array.from({ length: 16 }, (_, j) => j * i + 1));
      destroy(h);
    }
  });

  for (const destroyToo of [false, true]) {
    it(`unregister${destroyToo ? ' and destroy' : ''} while a request is queued: it completes from the engine's mapping`, async () => {
      const raw = (x: number) =>
        client.call('ModelInfer', {
          model_name: 'slow_model',
          inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1] }],
          raw_input_contents: [f32Bytes([x])],
        });
      const h = await createAndRegister('queued', `/queued${SUFFIX}`, 4);
      setSharedMemoryRegion(h, [Float32Array.of(0.5)]);
      const busy = [raw(0.1), raw(0.2)]; // both slow_model instances
      await sleep(10);
      const pending = client
        .call('ModelInfer', {
          model_name: 'slow_model',
          inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], parameters: shmParams('queued', 4) }],
        })
        .then(
          (r) => ({ ok: toF32(r.raw_output_contents[0]) }),
          (e: grpc.ServiceError) => ({ code: e.code, details: e.details }),
        );
      await sleep(10);
      await client.call('SystemSharedMemoryUnregister', { name: 'queued' });
      if (destroyToo) destroy(h);
      await Promise.all(busy);
      // The queued request takes one instance; the same input sent raw takes the other.
      const [out, plain] = await Promise.all([pending, raw(0.5)]);
      const want = toF32(plain.raw_output_contents[0]);
      // The worker maps through the engine's fd, so an unlinked key does not matter.
      expect(out).toEqual({ ok: want });
      expect(await client.call('ServerLive', {})).toEqual({ live: true });
      // afterEach: the worker's mapping made after the unregister is gone too.
    });
  }
});
