// The free list of a model's execution instances. Owns no threads: callers
// acquire an instance, run one execute() on it, and release it. Waiters are
// served FIFO, so instances never run two executions at once. The dynamic
// batcher takes whichever instance is free; the sequence batcher (direct
// strategy pins a sequence to one instance) claims a named one.
import type { ExecutionInstance } from '../api/scheduler.ts';

export class InstancePool {
  private readonly free: ExecutionInstance[];
  private readonly waiters: Array<(i: ExecutionInstance) => void> = [];

  private readonly all: ExecutionInstance[];

  constructor(instances: readonly ExecutionInstance[]) {
    this.all = [...instances];
    this.free = [...instances];
  }

  /** Every instance of the pool, busy or free. */
  get instances(): readonly ExecutionInstance[] {
    return this.all;
  }

  /** A new instance joins (adaptive instance counts): it serves the longest waiter at once. */
  add(instance: ExecutionInstance): void {
    this.all.push(instance);
    this.release(instance);
  }

  /** Take one instance out for good, once it is free (behind earlier waiters). */
  async retire(): Promise<ExecutionInstance> {
    const i = await this.acquire();
    this.all.splice(this.all.indexOf(i), 1);
    return i;
  }

  /** Take an idle instance without waiting, or undefined. */
  tryAcquire(): ExecutionInstance | undefined {
    return this.free.shift();
  }

  /** Whether `instance` is idle now. */
  isFree(instance: ExecutionInstance): boolean {
    return this.free.includes(instance);
  }

  /** Take this idle instance without waiting; false when it is busy. */
  claim(instance: ExecutionInstance): boolean {
    const at = this.free.indexOf(instance);
    if (at < 0) return false;
    this.free.splice(at, 1);
    return true;
  }

  /** Wait for an idle instance. */
  acquire(): Promise<ExecutionInstance> {
    const i = this.free.shift();
    if (i) return Promise.resolve(i);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Give an instance back: to the longest waiter, else to the free list. */
  release(instance: ExecutionInstance): void {
    const w = this.waiters.shift();
    if (w) w(instance);
    else this.free.push(instance);
  }
}
