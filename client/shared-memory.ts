// Client-side helpers for system shared memory, in the spirit of
// tritonclient.utils.shared_memory: create a region, fill it, read typed
// contents back, destroy it. For callers colocated with the engine (the
// gateway, tests, examples). Imports native/ and the protocol's tensor codec,
// never engine internals.
import { readdirSync, statSync } from 'node:fs';
import { elementCount as countOf, elementSize, isDatatype, serializeBytes, typedView, type TypedArray } from '../protocol/tensor-codec.ts';
import {
  pageSize,
  shmClose,
  shmMap,
  shmOpen,
  shmReserve,
  shmSize,
  shmTruncate,
  shmUnlinkIfExists,
  type ShmMapping,
} from '../native/index.ts';

/** A region this process created or opened and mapped whole. */
export interface ShmRegionHandle {
  /** The name to register with the engine. */
  readonly name: string;
  /** The shm key ('/name' under /dev/shm). */
  readonly key: string;
  readonly byteSize: number;
  /** The whole region, mapped read-write (no copy). */
  readonly bytes: Uint8Array;
}

const mappings = new WeakMap<ShmRegionHandle, ShmMapping>();

/**
 * shm_open(O_CREAT) `key`, grow it to `byteSize` (never shrink: someone else
 * may have it mapped), map it whole. `touch` pre-faults every page now (first
 * touch is slow on some VMs); `exclusive` fails if the key exists; `reserve`
 * allocates every page first (posix_fallocate), so a full /dev/shm throws
 * ShmSysError ENOSPC here instead of a later write raising SIGBUS.
 */
export function createSharedMemoryRegion(
  name: string,
  key: string,
  byteSize: number,
  opts: { touch?: boolean; exclusive?: boolean; reserve?: boolean } = {},
): ShmRegionHandle {
  if (!Number.isSafeInteger(byteSize) || byteSize <= 0) {
    throw new RangeError(`shared memory region '${name}': byte_size must be a positive integer, got ${byteSize}`);
  }
  const fd = shmOpen(key, { create: true, exclusive: opts.exclusive });
  let mapping: ShmMapping;
  let oldSize: number;
  try {
    oldSize = shmSize(fd);
    if (oldSize < byteSize) shmTruncate(fd, byteSize);
    if (opts.reserve) shmReserve(fd, 0, byteSize);
    mapping = shmMap(fd, 0, byteSize);
  } catch (err) {
    if (opts.exclusive) shmUnlinkIfExists(key);
    throw err;
  } finally {
    shmClose(fd);
  }
  if (opts.touch) touchPages(mapping.bytes, Math.min(oldSize, byteSize));
  const handle: ShmRegionHandle = Object.freeze({ name, key, byteSize, bytes: mapping.bytes });
  mappings.set(handle, mapping);
  return handle;
}

/** Copy `values` into the region back to back, starting at `offset`. */
export function setSharedMemoryRegion(handle: ShmRegionHandle, values: ArrayBufferView[], offset = 0): void {
  const bytes = liveBytes(handle);
  const total = values.reduce((n, v) => n + v.byteLength, 0);
  if (!Number.isSafeInteger(offset) || offset < 0 || offset + total > handle.byteSize) {
    throw new RangeError(
      `shared memory region '${handle.name}': ${total} bytes at offset ${offset} do not fit in ${handle.byteSize} bytes`,
    );
  }
  let o = offset;
  for (const v of values) {
    bytes.set(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), o);
    o += v.byteLength;
  }
}

export type ShmTypedArray = TypedArray;

/**
 * The tensor of `datatype` and `shape` at `offset`, as a typed view over the
 * region when aligned (a copy otherwise). BYTES returns the Uint8Array spanning
 * its serialized elements (4-byte LE length + bytes each); see getBytesElements.
 */
export function getContents(handle: ShmRegionHandle, datatype: string, shape: number[], offset = 0): ArrayBufferView {
  const bytes = liveBytes(handle);
  const count = elementCount(shape);
  if (datatype === 'BYTES') return bytes.subarray(offset, walkBytes(handle, count, offset).end);
  if (!isDatatype(datatype)) throw new TypeError(`unknown datatype '${datatype}'`);
  const byteLength = count * elementSize(datatype);
  checkRange(handle, offset, byteLength);
  return typedView(datatype, bytes.subarray(offset, offset + byteLength));
}

/** The elements of a BYTES tensor at `offset` (views into the region). */
export function getBytesElements(handle: ShmRegionHandle, shape: number[], offset = 0): Uint8Array[] {
  liveBytes(handle);
  return walkBytes(handle, elementCount(shape), offset).elems;
}

/** Serialize strings / byte strings as a BYTES tensor (4-byte LE length + bytes each), for setSharedMemoryRegion. */
export const serializeBytesTensor: (items: ReadonlyArray<string | Uint8Array>) => Uint8Array = serializeBytes;

/** Unmap the region and unlink its key (the engine's own mapping, if registered, stays valid). */
export function destroySharedMemoryRegion(handle: ShmRegionHandle): void {
  const mapping = mappings.get(handle);
  if (!mapping) throw new TypeError(`shared memory region '${handle.name}' was not created by createSharedMemoryRegion`);
  mapping.close();
  mappings.delete(handle);
  shmUnlinkIfExists(handle.key);
}

/** Keys ('/name') of the shm objects under /dev/shm, optionally only those starting with `prefix`. */
export function listSharedMemoryKeys(prefix = '/'): string[] {
  const p = prefix.startsWith('/') ? prefix : `/${prefix}`;
  let names: string[];
  try {
    names = readdirSync('/dev/shm');
  } catch {
    // No /dev/shm (not Linux, or not mounted): there are no POSIX shm objects to list.
    return [];
  }
  return names
    .filter((n) => !n.startsWith('sem.') && `/${n}`.startsWith(p))
    .filter((n) => {
      try {
        return statSync(`/dev/shm/${n}`).isFile();
      } catch {
        return false; // removed meanwhile
      }
    })
    .map((n) => `/${n}`)
    .sort();
}

// Fault every page in: write zeros past what the object held before (fresh
// pages), only read below it (keep what another process wrote there).
let touchSink = 0;
function touchPages(bytes: Uint8Array, keepBelow: number): void {
  for (let i = 0; i < bytes.byteLength; i += pageSize) {
    if (i < keepBelow) touchSink ^= bytes[i]!;
    else bytes[i] = 0;
  }
}

function walkBytes(handle: ShmRegionHandle, count: number, offset: number): { elems: Uint8Array[]; end: number } {
  const bytes = handle.bytes;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const elems: Uint8Array[] = [];
  let o = offset;
  for (let i = 0; i < count; i++) {
    checkRange(handle, o, 4);
    const len = dv.getUint32(o, true);
    checkRange(handle, o + 4, len);
    elems.push(bytes.subarray(o + 4, o + 4 + len));
    o += 4 + len;
  }
  return { elems, end: o };
}

function liveBytes(handle: ShmRegionHandle): Uint8Array {
  const mapping = mappings.get(handle);
  if (!mapping || mapping.closed) throw new Error(`shared memory region '${handle.name}' is destroyed or unknown`);
  return handle.bytes;
}

function checkRange(handle: ShmRegionHandle, offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0 || offset + length > handle.byteSize) {
    throw new RangeError(
      `shared memory region '${handle.name}': ${length} bytes at offset ${offset} are beyond its ${handle.byteSize} bytes`,
    );
  }
}

function elementCount(shape: number[]): number {
  if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw new RangeError(`invalid shape [${shape.join(', ')}]`);
  return countOf(shape);
}
