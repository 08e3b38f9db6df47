// The client shm helper (tritonclient.utils.shared_memory style) on real shm,
// and a round trip through the engine's SharedMemoryManager.
import { readdirSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSharedMemoryRegion,
  destroySharedMemoryRegion,
  getBytesElements,
  getContents,
  listSharedMemoryKeys,
  serializeBytesTensor,
  setSharedMemoryRegion,
  type ShmRegionHandle,
} from '../../client/shared-memory.ts';
import { SharedMemoryManager } from '../../engine/shm/shared-memory-manager.ts';
import { liveMappings, shmUnlinkIfExists } from '../../native/index.ts';

const PREFIX = `tritonish-test-${process.pid}-client-`;
let seq = 0;
const newKey = () => `/${PREFIX}${seq++}`;
const handles: ShmRegionHandle[] = [];
function region(byteSize: number, opts?: { touch?: boolean; exclusive?: boolean }, key = newKey()): ShmRegionHandle {
  const h = createSharedMemoryRegion(`r${seq}`, key, byteSize, opts);
  handles.push(h);
  return h;
}

afterEach(() => {
  for (const h of handles.splice(0)) {
    try {
      destroySharedMemoryRegion(h);
    } catch {
      // destroyed by the test itself
    }
  }
  const left = readdirSync('/dev/shm').filter((n) => n.startsWith(PREFIX));
  for (const n of left) shmUnlinkIfExists(`/${n}`);
  expect(left, 'test left objects in /dev/shm').toEqual([]);
});

describe('client shared memory helper', () => {
  it('creates, fills back to back and reads typed views without copying', () => {
    const h = region(4096, { exclusive: true, touch: true });
    expect(h.bytes.byteLength).toBe(4096);
    expect(listSharedMemoryKeys(`/${PREFIX}`)).toEqual([h.key]);
    expect(listSharedMemoryKeys(PREFIX)).toEqual([h.key]); // leading slash optional

    const f = new Float32Array([1.5, -2, 3.25, 4]);
    const i = new Int32Array([7, -8]);
    setSharedMemoryRegion(h, [f, i], 32);
    const fv = getContents(h, 'FP32', [2, 2], 32) as Float32Array;
    expect(fv).toBeInstanceOf(Float32Array);
    expect([...fv]).toEqual([1.5, -2, 3.25, 4]);
    expect([...(getContents(h, 'INT32', [2], 48) as Int32Array)]).toEqual([7, -8]);
    h.bytes.set(new Uint8Array(new Float32Array([9]).buffer), 32); // the view aliases the region
    expect(fv[0]).toBe(9);

    setSharedMemoryRegion(h, [new BigInt64Array([-5n, 1n << 40n])], 64);
    expect([...(getContents(h, 'INT64', [2], 64) as BigInt64Array)]).toEqual([-5n, 1n << 40n]);
    expect(getContents(h, 'FP16', [4], 64)).toBeInstanceOf(Uint16Array);
    expect(getContents(h, 'BOOL', [3], 0)).toBeInstanceOf(Uint8Array);
  });

  it('copies misaligned tensors, round-trips BYTES, and checks ranges and datatypes', () => {
    const h = region(256);
    setSharedMemoryRegion(h, [new Float64Array([Math.PI])], 3);
    const v = getContents(h, 'FP64', [1], 3) as Float64Array;
    expect(v[0]).toBe(Math.PI);
    expect(v.buffer).not.toBe(h.bytes.buffer);

    const ser = serializeBytesTensor(['héllo', new Uint8Array([0, 255]), '']);
    setSharedMemoryRegion(h, [ser], 100);
    const elems = getBytesElements(h, [3], 100);
    expect(new TextDecoder().decode(elems[0])).toBe('héllo');
    expect([...elems[1]!]).toEqual([0, 255]);
    expect(elems[2]!.byteLength).toBe(0);
    expect((getContents(h, 'BYTES', [3], 100) as Uint8Array).byteLength).toBe(ser.byteLength);

    expect(() => setSharedMemoryRegion(h, [new Uint8Array(10)], 250)).toThrow(/'r\d+'.*do not fit/);
    expect(() => getContents(h, 'FP32', [100], 0)).toThrow(RangeError);
    expect(() => getContents(h, 'COMPLEX', [1])).toThrow(/unknown datatype 'COMPLEX'/);
    expect(() => getBytesElements(h, [40], 100)).toThrow(RangeError);
  });

  it('opens an existing key without shrinking or clearing it; exclusive refuses it', () => {
    const a = region(8192, { exclusive: true });
    a.bytes[5000] = 77;
    expect(() => createSharedMemoryRegion('dup', a.key, 8192, { exclusive: true })).toThrow(expect.objectContaining({ errno: 'EEXIST' }));
    const b = createSharedMemoryRegion('b', a.key, 4096, { touch: true });
    expect(b.bytes[0]).toBe(0);
    const c = createSharedMemoryRegion('c', a.key, 8192, { touch: true });
    expect(c.bytes[5000]).toBe(77); // touch kept the data, size kept at 8192
    c.bytes[100] = 3;
    expect(a.bytes[100]).toBe(3);
    destroySharedMemoryRegion(b);
    expect(a.bytes[5000]).toBe(77); // unlinking the key does not unmap other mappings
    destroySharedMemoryRegion(c);
  });

  it('destroy unmaps and unlinks; the handle is dead afterwards', () => {
    const before = liveMappings();
    const h = createSharedMemoryRegion('gone', newKey(), 4096);
    expect(liveMappings()).toBe(before + 1);
    destroySharedMemoryRegion(h);
    expect(liveMappings()).toBe(before);
    expect(listSharedMemoryKeys(h.key)).toEqual([]);
    expect(h.bytes.byteLength).toBe(0);
    expect(() => setSharedMemoryRegion(h, [new Uint8Array(1)])).toThrow(/'gone'/);
    expect(() => destroySharedMemoryRegion(h)).toThrow(TypeError);
  });

  it('round-trips input and output through the engine manager', () => {
    const h = region(8192, { exclusive: true, touch: true });
    const mgr = new SharedMemoryManager();
    try {
      mgr.register('io', h.key, 0, h.byteSize);
      setSharedMemoryRegion(h, [new Float32Array([1, 2, 3])], 0);
      const input = mgr.acquire({ region: 'io', offset: 0, byteSize: 12 }, { tensor: 'IN', kind: 'input' });
      const output = mgr.acquire({ region: 'io', offset: 4096, byteSize: 12 }, { tensor: 'OUT', kind: 'output' });
      const x = new Float32Array(input.bytes.buffer, input.bytes.byteOffset, 3);
      const y = new Float32Array(output.bytes.buffer, output.bytes.byteOffset, 3);
      for (let k = 0; k < 3; k++) y[k] = x[k]! * 10; // the "model"
      input.release();
      output.release();
      expect([...(getContents(h, 'FP32', [3], 4096) as Float32Array)]).toEqual([10, 20, 30]);
    } finally {
      mgr.close();
    }
  });
});
