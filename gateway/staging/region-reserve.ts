// Staging regions created and reserved whole (posix_fallocate through
// client/shared-memory.ts), so a full /dev/shm is an answer here (ENOSPC /
// ENOMEM) rather than a SIGBUS on first touch that the guard would hide
// under zero pages the engine cannot see. While /dev/shm plainly lacks the
// room (statfs), no reservation is tried: a failing posix_fallocate fills the
// tmpfs to the brim for a moment, which could fail other writers there.
import { statfsSync } from 'node:fs';
import { createSharedMemoryRegion, destroySharedMemoryRegion, type ShmRegionHandle } from '../../client/shared-memory.ts';
import { ShmSysError } from '../../native/index.ts';
import { regionName } from './region-lease.ts';

/**
 * Regions number `have` .. `count - 1` of this owner, in order, stopping at
 * the first that shared memory cannot hold (`full` says why); any other
 * failure is thrown, after unmapping and unlinking the ones made by this call.
 */
export function reserveRegions(
  prefix: string,
  ownerId: string,
  have: number,
  count: number,
  byteSize: number,
): { handles: ShmRegionHandle[]; full?: ShmSysError } {
  const handles: ShmRegionHandle[] = [];
  for (let n = have; n < count; n++) {
    const name = regionName(prefix, ownerId, n);
    const free = freeShmBytes();
    if (free !== undefined && free < byteSize) {
      return { handles, full: new ShmSysError('ENOSPC', 'statfs', `statfs '/dev/shm': ${free} bytes free, ${byteSize} needed (ENOSPC)`) };
    }
    try {
      handles.push(createSharedMemoryRegion(name, `/${name}`, byteSize, { touch: true, exclusive: true, reserve: true }));
    } catch (e) {
      if (e instanceof ShmSysError && (e.errno === 'ENOSPC' || e.errno === 'ENOMEM')) return { handles, full: e };
      for (const h of handles) destroySharedMemoryRegion(h);
      throw e;
    }
  }
  return { handles };
}

/** Bytes an unprivileged writer may still take in /dev/shm, or undefined when statfs cannot say. */
function freeShmBytes(): number | undefined {
  try {
    const s = statfsSync('/dev/shm');
    return s.bavail * s.bsize;
  } catch {
    return undefined; // no /dev/shm to ask (not Linux): posix_fallocate alone decides
  }
}
