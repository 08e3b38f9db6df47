// over 300 lines: register, status, acquire/release and bounded reads/writes share one region table and its checks
// The engine's registered system shared-memory regions (Triton's
// SharedMemoryManager, system shm part): register/unregister/status for the
// frontends, acquire/release for the code that reads inputs from or writes
// outputs into a region.
import { checkSize, isValidShmKey, shmClose, shmMap, shmOpen, type ShmFd, type ShmSysError, type ShmMapping } from '../../native/index.ts';
import type { ShmRegionStatus } from '../api/server-api.ts';
import { StatusError, alreadyExists, internal, invalidArg, notFound, unavailable } from '../api/status.ts';
import { log, tracer } from '../../common/logger.ts';
import { boundsProblem, intactProblem, isCount, isReservedKey, objectVanished, RESERVED_KEY_PREFIX } from './shm-region-checks.ts';

const trace = tracer('shm');

export interface SharedMemoryManagerOptions {
  /** Only keys starting with this prefix may be registered (e.g. '/tritonish-'). */
  keyPrefix?: string;
  /** Most regions registered at once. */
  maxRegions?: number;
  /** Most bytes (sum of byte_size) registered at once. */
  maxTotalBytes?: number;
}

/** Bytes of one tensor inside a registered region, held until release(). */
export interface ShmAcquired {
  /** View over the mapping (no copy); valid until release(). */
  readonly bytes: Uint8Array;
  /** The shm key and the tensor's offset in the shm object: enough for a worker thread to map the same bytes. */
  readonly key: string;
  readonly absoluteOffset: number;
  /**
   * The region's open fd (fds are process-wide): a worker thread maps the very
   * object this manager checked, even if the key was unlinked or reused since. Valid until release().
   */
  readonly fd: ShmFd;
  /** The registered region's own offset and size in the object (what a worker maps once). */
  readonly regionOffset: number;
  readonly regionSize: number;
  /** True once the region left the table (unregistered and no longer in use, or vanished). */
  readonly unregistered: boolean;
  /**
   * Whether the bytes are still intact: the object still holds them and no
   * read or write faulted on the mapping (the SIGBUS guard's zero page). Call
   * right before and after each read or write; an error fails the request.
   */
  check(): StatusError | undefined;
  /** Drop this use of the region (idempotent). */
  release(): void;
}

interface Region {
  readonly name: string;
  readonly key: string;
  readonly offset: number;
  readonly byteSize: number;
  readonly fd: ShmFd;
  readonly mapping: ShmMapping;
  users: number;
  /** Unregister asked for while in use: listed until the last user releases, then removed (Triton's awaiting_unregister). */
  awaitingUnregister: boolean;
  unregistered: boolean;
}

/**
 * Owns every registered region: one fd and one mapping of [offset, offset+byte_size)
 * per region, made once at registration. A region with users (acquired, not released)
 * stays in the table (listed by status, usable by new requests) after an unregister
 * and leaves it, unmapped, when its last user releases, as in Triton.
 * Threading: used from the engine's main thread only; worker threads map the
 * same bytes themselves from `key` + `absoluteOffset`.
 */
export class SharedMemoryManager {
  readonly #regions = new Map<string, Region>();
  /** Regions that left the table while in use (close(), a vanished object), unmapped at their last release. */
  readonly #draining = new Set<Region>();
  /** Called with a region's key once it left the table (the server drops worker mappings of it). */
  onRemoved?: (key: string) => void;
  readonly #opts: SharedMemoryManagerOptions;
  #totalBytes = 0;
  #closed = false;

  constructor(opts: SharedMemoryManagerOptions = {}) {
    this.#opts = opts;
  }

  /** Register `name` as [offset, offset+byteSize) of the shm object `key` (Triton's SystemSharedMemoryRegister). */
  register(name: string, key: string, offset: number, byteSize: number): void {
    if (this.#closed) throw unavailable('shared memory manager is shut down');
    if (typeof name !== 'string' || name === '') throw invalidArg('shared memory region name must not be empty');
    if (typeof key === 'string' && isReservedKey(key)) {
      throw invalidArg(
        `cannot register shared memory region '${name}' with key '${key}' as the key contains the reserved prefix '${RESERVED_KEY_PREFIX}'`,
      );
    }
    if (this.#regions.has(name)) throw alreadyExists(`shared memory region '${name}' already in manager`);
    if (!isValidShmKey(key)) throw invalidArg(`cannot register shared memory region '${name}' - invalid shm key '${key}'`);
    const prefix = this.#opts.keyPrefix;
    if (prefix !== undefined && !key.startsWith(prefix)) {
      throw invalidArg(`shared memory key '${key}' for region '${name}' does not start with the allowed prefix '${prefix}'`);
    }
    if (!isCount(offset) || !isCount(byteSize)) {
      throw invalidArg(`shared memory region '${name}': offset and byte_size must be non-negative integers`);
    }
    this.#checkLimits(name, byteSize);

    let fd: ShmFd;
    try {
      fd = shmOpen(key);
    } catch (err) {
      trace(`open '${key}' for region '${name}' failed: ${(err as Error).message}`);
      // A key naming no object (or one the engine may not open) is the client's mistake: 400 / INVALID_ARG.
      const clients = ['ENOENT', 'EACCES', 'ENAMETOOLONG', 'EINVAL'].includes((err as ShmSysError).errno);
      throw new StatusError(clients ? 'INVALID_ARG' : 'INTERNAL', `Unable to open shared memory region: '${key}'`, err);
    }
    let mapping: ShmMapping;
    try {
      const { ok, size } = checkSize(fd, offset + byteSize);
      if (!ok) {
        log.info(`shared memory region '${name}': offset ${offset} + byte_size ${byteSize} is beyond the ${size} bytes of '${key}'`);
        throw invalidArg(`failed to register shared memory region '${name}': invalid args`);
      }
      mapping = shmMap(fd, offset, byteSize);
    } catch (err) {
      closeQuietly(fd);
      if (err instanceof StatusError) throw err;
      throw internal(`Unable to map shared memory region '${name}' ('${key}')`, err);
    }
    this.#regions.set(name, { name, key, offset, byteSize, fd, mapping, users: 0, awaitingUnregister: false, unregistered: false });
    this.#totalBytes += byteSize;
    trace(`registered '${name}' -> '${key}' [${offset}, +${byteSize})`);
  }

  /**
   * Unregister `name`; '' unregisters all. An unknown name succeeds (as in Triton).
   * A region in use stays listed until its last user releases it.
   */
  unregister(name: string, who?: string): void {
    if (name === '') {
      if (this.#regions.size > 0) {
        log.warn(`unregistering all ${this.#regions.size} system shared memory regions (requested by ${who ?? 'unknown'})`);
      }
      for (const region of [...this.#regions.values()]) this.#unregister(region);
      return;
    }
    const region = this.#regions.get(name);
    if (region) this.#unregister(region);
  }

  /** Status of one region (NOT_FOUND when unknown) or, without a name, of all. */
  status(name?: string): ShmRegionStatus[] {
    if (name) {
      const region = this.#regions.get(name);
      if (!region) throw notFound(`Unable to find system shared memory region: '${name}'`);
      return [statusOf(region)];
    }
    return [...this.#regions.values()].map(statusOf);
  }

  /**
   * The bytes of one tensor in a registered region, after checking the region,
   * the bounds and that the shm object still holds them (a truncated object is
   * INVALID_ARG, never SIGBUS). The region stays mapped until release().
   */
  acquire(
    ref: { region: string; offset: number; byteSize: number; wide?: { offset: bigint; byteSize: bigint } },
    purpose: { tensor: string; kind: 'input' | 'output' },
  ): ShmAcquired {
    const what = `${purpose.kind} '${purpose.tensor}'`;
    const region = this.#regions.get(ref.region);
    // NOT_FOUND as Triton's GetMemoryInfo answers (HTTP 404, gRPC NOT_FOUND), its text first.
    if (!region) throw notFound(`Unable to find shared memory region: '${ref.region}' (${what})`);
    const bad = boundsProblem(region, ref, what);
    if (bad) throw bad;
    const absoluteOffset = region.offset + ref.offset;
    const needEnd = absoluteOffset + ref.byteSize;
    const intact = () => intactProblem(region, needEnd, what);
    const problem = intact();
    if (problem) throw problem;
    region.users++;
    let released = false;
    return {
      bytes: region.mapping.bytes.subarray(ref.offset, ref.offset + ref.byteSize),
      key: region.key,
      absoluteOffset,
      fd: region.fd,
      regionOffset: region.offset,
      regionSize: region.byteSize,
      get unregistered() {
        return region.unregistered;
      },
      check: () => (released ? undefined : intact()),
      release: () => {
        if (released) return;
        released = true;
        region.users--;
        if (region.users > 0) return;
        if (region.awaitingUnregister && this.#regions.get(region.name) === region) this.#remove(region);
        else if (region.unregistered) this.#unmap(region);
      },
    };
  }

  /**
   * Unregister regions whose shm object vanished: its key was unlinked (its
   * owner died and was reaped while the engine was away) or now names another
   * object. Without this the engine's mapping keeps the memory alive for ever.
   * Returns the keys of the regions removed.
   */
  sweepVanished(): string[] {
    const keys: string[] = [];
    for (const region of [...this.#regions.values()]) {
      if (!objectVanished(region)) continue;
      log.warn(`shared memory region '${region.name}': its object '${region.key}' is gone; unregistering it`);
      this.#remove(region);
      keys.push(region.key);
    }
    return keys;
  }

  /** Unmap everything, in use or not (engine shutdown); later registrations are refused. */
  close(): void {
    this.#closed = true;
    for (const region of [...this.#regions.values(), ...this.#draining]) this.#unmap(region);
    this.#regions.clear();
    this.#draining.clear();
    this.#totalBytes = 0;
  }

  #checkLimits(name: string, byteSize: number): void {
    const { maxRegions, maxTotalBytes } = this.#opts;
    if (maxRegions !== undefined && this.#regions.size >= maxRegions) {
      throw unavailable(`cannot register shared memory region '${name}': the limit of ${maxRegions} regions is reached`);
    }
    if (maxTotalBytes !== undefined) {
      if (byteSize > maxTotalBytes) {
        throw invalidArg(`shared memory region '${name}': byte_size ${byteSize} exceeds the limit of ${maxTotalBytes} registered bytes`);
      }
      if (this.#totalBytes + byteSize > maxTotalBytes) {
        throw unavailable(
          `cannot register shared memory region '${name}': ${this.#totalBytes} of ${maxTotalBytes} registered bytes ` +
            `are in use, ${byteSize} more do not fit`,
        );
      }
    }
  }

  /** Take `region` out of the table, or mark it to leave at its last release while in use. */
  #unregister(region: Region): void {
    if (region.users > 0) {
      region.awaitingUnregister = true;
      trace(`'${region.name}' will be unregistered after ${region.users} in-flight use(s) complete`);
      return;
    }
    this.#remove(region);
  }

  #remove(region: Region): void {
    this.#regions.delete(region.name);
    this.#totalBytes -= region.byteSize;
    region.unregistered = true;
    if (region.users === 0) {
      this.#unmap(region);
    } else {
      this.#draining.add(region);
      trace(`removed '${region.name}'; unmapping after ${region.users} in-flight use(s)`);
    }
    this.onRemoved?.(region.key);
  }

  #unmap(region: Region): void {
    this.#draining.delete(region);
    if (region.mapping.closed) return;
    region.mapping.close();
    closeQuietly(region.fd);
    trace(`unmapped '${region.name}' ('${region.key}')`);
  }
}

function statusOf(r: Region): ShmRegionStatus {
  return { name: r.name, key: r.key, offset: r.offset, byte_size: r.byteSize };
}

function closeQuietly(fd: ShmFd): void {
  try {
    shmClose(fd);
  } catch (err) {
    log.error(`closing shared memory fd ${fd} failed`, err);
  }
}
