// A python execution instance's lifecycle table (python-instance.ts owns the
// state, through common/lifecycle.ts).
import type { TransitionTable } from '../../../common/lifecycle.ts';

/** A python execution instance's states: no live stub, a stub starting, a stub ready, unloaded for good. */
export type InstanceState = 'STOPPED' | 'STARTING' | 'READY' | 'CLOSED';

/** The allowed moves; READY -> STARTING is a restart after a stub died but before its exit was seen. */
export const INSTANCE_TRANSITIONS: TransitionTable<InstanceState> = {
  STOPPED: ['STARTING', 'CLOSED'],
  STARTING: ['READY', 'STOPPED', 'CLOSED'],
  READY: ['STARTING', 'STOPPED', 'CLOSED'],
  CLOSED: [],
};
