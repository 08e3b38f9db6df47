// The one loader of the shm addon and its typed API: argument checks,
// defaults, page alignment and errno names/messages live here; the addon
// (src/shm.cc) only makes the syscalls. Safe to import from worker threads
// (the addon is a Node-API module; its mapping table is process-wide).
import { createRequire } from 'node:module';
import { getSystemErrorMap, getSystemErrorName } from 'node:util';
import type { RawShmError, RawTimerAddon, ShmAddon } from './shm-addon.d.ts';

const addon: ShmAddon = loadAddon();

function loadAddon(): ShmAddon {
  const require = createRequire(import.meta.url);
  try {
    return require('./build/Release/shm.node') as ShmAddon;
  } catch (err) {
    throw new Error(
      `native shm addon not built (native/build/Release/shm.node): run \`npm install\` or ` +
        `\`npx node-gyp rebuild --directory=native\` (${(err as Error).message})`,
    );
  }
}

/** A file descriptor of an open shm object. */
export type ShmFd = number & { readonly __brand: 'ShmFd' };

/** A live mapping; `bytes` views exactly [offset, offset+length) of the object. */
export interface ShmMapping {
  readonly bytes: Uint8Array;
  /** Unmap now (idempotent); `bytes` then reads as empty. Otherwise GC unmaps it. */
  close(): void;
  readonly closed: boolean;
  /** True once the object shrank under the mapping and the SIGBUS guard put zero pages in. */
  readonly faulted: boolean;
}

/** A failed syscall (or a key rejected before it), with the errno name. */
export class ShmSysError extends Error {
  /** errno name, e.g. 'ENOENT'. */
  errno: string;
  syscall: string;
  key?: string;
  constructor(errno: string, syscall: string, message: string, key?: string) {
    super(message);
    this.name = 'ShmSysError';
    this.errno = errno;
    this.syscall = syscall;
    if (key !== undefined) this.key = key;
  }
}

const KEY_RE = /^\/[A-Za-z0-9._-]{1,250}$/;

/** Whether `key` is a shm key we accept: '/' then 1-250 of [A-Za-z0-9._-], no '..', not all dots. */
export function isValidShmKey(key: string): boolean {
  return typeof key === 'string' && KEY_RE.test(key) && !key.includes('..') && !/^\/\.+$/.test(key);
}

/**
 * A float tensor's values as JSON array text, byte for byte what
 * JSON.stringify(Array.from(view)) writes (shortest round-trip digits, the
 * spec's plain or exponent form, null for NaN and the infinities), in about
 * half its time (src/number-json.cc).
 */
export function numbersJson(view: Float32Array | Float64Array): string {
  return addon.numbersJson(view);
}

/**
 * The numbers of a JSON body's long number arrays, read into `into` (by
 * std::from_chars, several times faster than V8 on 16-17 digit fractions),
 * and the rest of the body as text for JSON.parse, each such array (at least
 * `minTyped` numbers) replaced by the string "\u0001<at>,<count>": its
 * numbers are into[at .. at+count). Returns the count `into` must hold when it
 * holds fewer, and undefined when the body is outside the strict subset the
 * addon reads (non-ASCII, string escapes or control characters, nesting past
 * 64, a number past double range, any syntax error): the caller then parses
 * the body with JSON.parse, for its value or its error. Within the subset no
 * string holds U+0001, so a string starting with it is always a marker
 * (src/json-fast.cc; gateway/calls/json-body.ts is the caller).
 */
export function scanJsonNumbers(bytes: Uint8Array, minTyped: number, into: Float64Array): string | number | undefined {
  return addon.scanJsonNumbers(bytes, minTyped, into);
}

/** The addon's timerfd timer, for native/precise-timer.ts (its one user). */
export const timerAddon: RawTimerAddon = addon.timer;

/** The system page size (mmap offsets are aligned down to it). */
export const pageSize: number = addon.pageSize;

/** Return the allocator's free memory to the kernel (glibc malloc_trim over all arenas); true when some was released. */
export function mallocTrim(): boolean {
  return addon.mallocTrim();
}

/** Mappings of this process not yet unmapped (every thread), for tests and leak checks. */
export function liveMappings(): number {
  return addon.liveMappings();
}

/** shm_open; `exclusive` implies `create`; mode defaults to 0600. */
export function shmOpen(key: string, opts: { create?: boolean; exclusive?: boolean; readOnly?: boolean; mode?: number } = {}): ShmFd {
  checkKey(key, 'shm_open');
  const mode = opts.mode ?? 0o600;
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) throw new RangeError(`invalid mode ${mode}`);
  let flags = 0;
  if (opts.create || opts.exclusive) flags |= addon.flags.create;
  if (opts.exclusive) flags |= addon.flags.exclusive;
  if (opts.readOnly) flags |= addon.flags.readOnly;
  return sys(() => addon.open(key, flags, mode), key) as ShmFd;
}

/** ftruncate the object to `size` bytes. */
export function shmTruncate(fd: ShmFd, size: number): void {
  checkFd(fd);
  checkCount(size, 'size');
  sys(() => addon.ftruncate(fd, size));
}

/**
 * Reserve [offset, offset+length) of the object now (posix_fallocate): on a
 * full tmpfs this throws ENOSPC here rather than the first write to a page
 * raising SIGBUS later. Grows the object if it ends short of offset+length.
 */
export function shmReserve(fd: ShmFd, offset: number, length: number): void {
  checkFd(fd);
  checkCount(offset, 'offset');
  checkCount(length, 'length');
  if (length === 0) return;
  sys(() => addon.fallocate(fd, offset, length));
}

/** The object's current size (fstat st_size). */
export function shmSize(fd: ShmFd): number {
  checkFd(fd);
  return sys(() => addon.fstatSize(fd));
}

/** Whether the object still holds bytes up to `needEnd` (fstat), and its size: check before touching a mapping. */
export function checkSize(fd: ShmFd, needEnd: number): { ok: boolean; size: number } {
  const size = shmSize(fd);
  return { ok: size >= needEnd, size };
}

/** Map [offset, offset+length) shared; any offset (the mapping starts at the page below it). */
export function shmMap(fd: ShmFd, offset: number, length: number, opts: { readOnly?: boolean } = {}): ShmMapping {
  checkFd(fd);
  checkCount(offset, 'offset');
  checkCount(length, 'length');
  if (length === 0) return new Mapping(null, new Uint8Array(0));
  const delta = offset % pageSize;
  const buffer = sys(() => addon.mmap(fd, offset - delta, length + delta, !opts.readOnly));
  return new Mapping(buffer, new Uint8Array(buffer, delta, length));
}

/** close(fd); mappings made from it stay valid. */
export function shmClose(fd: ShmFd): void {
  checkFd(fd);
  sys(() => addon.close(fd));
}

/** shm_unlink; throws ENOENT when the key does not exist. */
export function shmUnlink(key: string): void {
  checkKey(key, 'shm_unlink');
  sys(() => addon.unlink(key), key);
}

/** shm_unlink, returning false instead of throwing when the key does not exist. */
export function shmUnlinkIfExists(key: string): boolean {
  try {
    shmUnlink(key);
    return true;
  } catch (err) {
    if (err instanceof ShmSysError && err.errno === 'ENOENT') return false;
    throw err;
  }
}

// Owns one addon mapping until close() or GC; single-threaded like any JS object.
class Mapping implements ShmMapping {
  #buffer: ArrayBuffer | null;
  #faultedAtClose = false;
  constructor(
    buffer: ArrayBuffer | null,
    readonly bytes: Uint8Array,
  ) {
    this.#buffer = buffer;
  }
  get closed(): boolean {
    return this.#buffer === null;
  }
  get faulted(): boolean {
    return this.#buffer ? addon.mappingFaulted(this.#buffer) : this.#faultedAtClose;
  }
  close(): void {
    const buffer = this.#buffer;
    if (!buffer) return;
    this.#faultedAtClose = addon.mappingFaulted(buffer);
    this.#buffer = null;
    sys(() => addon.munmap(buffer));
  }
}

function sys<T>(call: () => T, key?: string): T {
  try {
    return call();
  } catch (err) {
    const raw = err as Partial<RawShmError>;
    if (typeof raw.errno !== 'number' || typeof raw.syscall !== 'string') throw err;
    const name = safeErrName(raw.errno);
    const text = getSystemErrorMap().get(-raw.errno)?.[1] ?? `errno ${raw.errno}`;
    const where = key !== undefined ? ` '${key}'` : '';
    throw new ShmSysError(name, raw.syscall, `${raw.syscall}${where}: ${text} (${name})`, key);
  }
}

function safeErrName(errno: number): string {
  try {
    return getSystemErrorName(-errno);
  } catch {
    return `E${errno}`;
  }
}

function checkKey(key: string, syscall: string): void {
  if (!isValidShmKey(key)) {
    throw new ShmSysError(
      'EINVAL',
      syscall,
      `invalid shared memory key '${String(key)}': expected '/' followed by 1-250 of [A-Za-z0-9._-]`,
      String(key),
    );
  }
}

function checkFd(fd: number): void {
  if (!Number.isInteger(fd) || fd < 0 || fd > 0x7fffffff) throw new RangeError(`invalid file descriptor ${fd}`);
}

function checkCount(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${what} must be a non-negative integer, got ${n}`);
}
