// The lifecycle of this gateway's lease on one of its own arena regions, as
// an enum with one guarded transition function (STYLE point 7).
//
//   unleased --renew ok--> held --renew ok--> held
//   held --another owner holds it--> lost --renew ok--> held
//   any (but released) --shutdown--> released
//
// A region is usable for staging only while `held` and not past the local
// validity deadline (the store may be unreachable; then leases lapse).

import { checkTransition, type TransitionTable } from '../../common/lifecycle.ts';

export type RegionLeaseState = 'unleased' | 'held' | 'lost' | 'released';

const ALLOWED: TransitionTable<RegionLeaseState> = {
  unleased: ['held', 'lost', 'released'],
  held: ['held', 'lost', 'released'],
  lost: ['held', 'lost', 'released'],
  released: [],
};

/** The next state, or IllegalTransition (INTERNAL) naming the region and the illegal move. */
export function leaseTransition(region: string, from: RegionLeaseState, to: RegionLeaseState): RegionLeaseState {
  return checkTransition(ALLOWED, `lease of region '${region}'`, from, to);
}

/** Owner ids look like `<pid>x<hex>`: the pid lets a reaper on the same host check liveness. */
export function newOwnerId(pid = process.pid): string {
  return `${pid}x${Math.floor(Math.random() * 0xffffffff)
    .toString(16)
    .padStart(8, '0')}`;
}

/** The pid in an owner id, or undefined when the id is not ours. */
export function ownerPid(owner: string): number | undefined {
  const m = /^(\d+)x[0-9a-f]+$/.exec(owner);
  return m ? Number(m[1]) : undefined;
}

/** Region name (as registered with the engine) of region n of an owner; the shm key is '/' + name. */
export function regionName(prefix: string, owner: string, n: number): string {
  return `${prefix}_${owner}_${n}`;
}

/** The owner id inside a region name under `prefix`, or undefined when it is not one of ours. */
export function regionOwner(prefix: string, name: string): string | undefined {
  const n = name.startsWith('/') ? name.slice(1) : name;
  if (!n.startsWith(`${prefix}_`)) return undefined;
  const m = /^(\d+x[0-9a-f]+)_\d+$/.exec(n.slice(prefix.length + 1));
  return m ? m[1] : undefined;
}

/** Whether a process with this pid exists on this host (EPERM counts as alive). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
