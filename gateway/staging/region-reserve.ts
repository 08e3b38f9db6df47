// Staging regions created and reserved whole (posix_fallocate through
// client/shared-memory.ts), so a full /dev/shm is an answer here (ENOSPC /
// ENOMEM) rather than a SIGBUS on first touch that the guard would hide
// under zero pages the engine cannot see.
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
