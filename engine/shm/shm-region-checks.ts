// The checks the shared-memory manager makes of a key, of a region and of a
// tensor in it: Triton's reserved key prefix, Triton's offset / byte size
// bounds (its order and words), whether the object still holds the bytes,
// whether its key still names the object held.
// Pure functions of the region's fields, apart from fstat/stat.
import fs from 'node:fs';
import { checkSize, type ShmFd, type ShmMapping } from '../../native/index.ts';
import { internal, invalidArg, type StatusError } from '../api/status.ts';

/** The fields of a registered region these checks read. */
export interface CheckedRegion {
  readonly name: string;
  readonly key: string;
  readonly byteSize: number;
  readonly fd: ShmFd;
  readonly mapping: ShmMapping;
}

/** size_t's maximum on a 64-bit host, as Triton's overflow text prints it. */
const SIZE_MAX = 2n ** 64n - 1n;

export function isCount(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 0;
}

/** True when the region's key no longer names the object the engine holds open (POSIX shm lives in /dev/shm on Linux). */
export function objectVanished(region: CheckedRegion): boolean {
  let held: fs.Stats;
  try {
    held = fs.fstatSync(region.fd);
  } catch {
    return false; // cannot tell: keep it
  }
  try {
    const now = fs.statSync(`/dev/shm${region.key}`);
    return now.ino !== held.ino || now.dev !== held.dev;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/** Why the bytes of a region up to `needEnd` cannot be trusted now, or undefined. */
export function intactProblem(region: CheckedRegion, needEnd: number, what: string): StatusError | undefined {
  if (region.mapping.faulted) {
    return invalidArg(`shared memory region '${region.name}' ('${region.key}') shrank while registered; register it again (${what})`);
  }
  let check: { ok: boolean; size: number };
  try {
    check = checkSize(region.fd, needEnd);
  } catch (err) {
    return internal(`Unable to check shared memory region '${region.name}' ('${region.key}')`, err);
  }
  if (!check.ok) {
    return invalidArg(
      `shared memory region '${region.name}' ('${region.key}') was truncated to ${check.size} bytes; ${what} needs bytes up to ${needEnd}`,
    );
  }
  return undefined;
}

/**
 * Triton's checks of a tensor's offset and byte_size against its region (in
 * its order and words), with exact arithmetic: over HTTP both may be any
 * uint64 (`wide` keeps values past 2^53 exactly).
 */
export function boundsProblem(
  region: CheckedRegion,
  ref: { offset: number; byteSize: number; wide?: { offset: bigint; byteSize: bigint } },
  what: string,
): StatusError | undefined {
  if (!ref.wide && (!isCount(ref.offset) || !isCount(ref.byteSize))) {
    return invalidArg(`shared memory offset and byte size must be non-negative integers for ${what}`);
  }
  const offset = ref.wide?.offset ?? BigInt(ref.offset);
  const byteSize = ref.wide?.byteSize ?? BigInt(ref.byteSize);
  const end = region.byteSize > 0 ? BigInt(region.byteSize - 1) : 0n;
  if (offset > end) return invalidArg(`Invalid offset for shared memory region: '${region.name}' (${what})`);
  if (byteSize > SIZE_MAX - offset) {
    return invalidArg(
      `Integer overflow detected: byte_size (${byteSize}) + offset (${offset}) exceeds maximum value (${SIZE_MAX}) for region '${region.name}'`,
    );
  }
  if (offset + byteSize > BigInt(region.byteSize)) {
    return invalidArg(`Invalid offset + byte size for shared memory region: '${region.name}' (${what})`);
  }
  return undefined;
}

/** Triton's kTritonSharedMemoryRegionPrefix: keys of its Python backend's own regions, never a client's. */
export const RESERVED_KEY_PREFIX = 'triton_python_backend_shm_region_';

/**
 * Whether `key` names the reserved prefix's objects. shm_open treats any
 * number of leading slashes as one (`///triton_python_backend_shm_region_x`
 * opens `/triton_python_backend_shm_region_x`), so they are skipped before
 * the prefix is compared, and this check comes before any key syntax check.
 */
export function isReservedKey(key: string): boolean {
  let i = 0;
  while (key[i] === '/') i++;
  return key.startsWith(RESERVED_KEY_PREFIX, i);
}
