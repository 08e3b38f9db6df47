// The raw addon (build/Release/shm.node), exactly as src/shm.cc exports it.
// Only native/index.ts loads it; everything else uses that module's API.

/** An error thrown by the addon: `errno` is the raw number, `syscall` the call that failed. */
export interface RawShmError extends Error {
  errno: number;
  syscall: string;
}

export interface ShmAddon {
  /** shm_open(key, O_RDWR|O_RDONLY [|O_CREAT][|O_EXCL] | O_CLOEXEC, mode) -> fd. */
  open(key: string, flags: number, mode: number): number;
  /** ftruncate(fd, size). */
  ftruncate(fd: number, size: number): void;
  /** posix_fallocate(fd, offset, length): reserve the pages now (ENOSPC on a full tmpfs). */
  fallocate(fd: number, offset: number, length: number): void;
  /** fstat(fd).st_size. */
  fstatSize(fd: number): number;
  /** mmap(MAP_SHARED) of [offset, offset+length); offset page-aligned; an external ArrayBuffer, unmapped by its finalizer. */
  mmap(fd: number, offset: number, length: number, writable: boolean): ArrayBuffer;
  /** munmap now and detach the buffer; throws EINVAL when it is not a live mapping of this addon. */
  munmap(buffer: ArrayBuffer): void;
  /** Whether the SIGBUS guard replaced part of this mapping with zero pages (the file shrank under it). */
  mappingFaulted(buffer: ArrayBuffer): boolean;
  /** Mappings not yet unmapped, across all threads of the process. */
  liveMappings(): number;
  mallocTrim(): boolean;
  /** close(fd). */
  close(fd: number): void;
  /** shm_unlink(key). */
  unlink(key: string): void;
  readonly pageSize: number;
  /** Bits for open()'s flags argument. */
  readonly flags: { readonly create: number; readonly exclusive: number; readonly readOnly: number };
  /** A timerfd wake-up on the calling thread's loop (src/precise-timer.cc); used through native/precise-timer.ts. */
  readonly timer: RawTimerAddon;
  /** The values as JSON array text, as JSON.stringify writes them (src/number-json.cc). */
  numbersJson(view: Float32Array | Float64Array): string;
  /** A strict-subset JSON body with its long number arrays read into `into` and marked in the text; the count `into` needs; or undefined (src/json-fast.cc). */
  scanJsonNumbers(bytes: Uint8Array, minTyped: number, into: Float64Array): string | number | undefined;
}

/** An opaque timer handle (an External). */
export type RawTimer = { readonly __brand: 'RawTimer' };

export interface RawTimerAddon {
  /** A disarmed timer that calls `callback` on this thread's loop each time it fires. */
  create(callback: () => void): RawTimer;
  /** Fire once at `atNs` (CLOCK_MONOTONIC, as process.hrtime.bigint()); replaces any armed time. */
  arm(timer: RawTimer, atNs: bigint): void;
  /** Stop keeping the loop alive; the armed time may still fire (the callback then finds nothing due). */
  disarm(timer: RawTimer): void;
  /** Idempotent. */
  close(timer: RawTimer): void;
}
