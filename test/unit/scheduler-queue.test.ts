import { describe, expect, it } from 'vitest';
import { SchedulerQueue } from '../../engine/scheduling/scheduler-queue.ts';
import { StatusError } from '../../engine/api/status.ts';

const US = 1000n;
const names = (q: SchedulerQueue<string>) => q.ordered().map((e) => e.item);

function expectStatus(fn: () => unknown, code: string, text: RegExp): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(StatusError);
    expect((e as StatusError).code).toBe(code);
    expect((e as StatusError).message).toMatch(text);
    return;
  }
  throw new Error('expected a StatusError');
}

describe('SchedulerQueue priority levels', () => {
  it('is one FIFO when the model has no priority levels, ignoring request priorities', () => {
    const q = new SchedulerQueue<string>('m');
    q.enqueue('a', 0, 0, 0n);
    q.enqueue('b', 7, 0, 1n);
    q.enqueue('c', undefined, 0, 2n);
    expect(names(q)).toEqual(['a', 'b', 'c']);
    expect(q.ordered().map((e) => e.level)).toEqual([0, 0, 0]);
  });

  it('orders level 1 first, maps priority 0 to default_priority_level', () => {
    const q = new SchedulerQueue<string>('m', { priority_levels: 3, default_priority_level: 2 });
    q.enqueue('low', 3, 0, 0n);
    q.enqueue('default', 0, 0, 1n);
    q.enqueue('high', 1, 0, 2n);
    q.enqueue('default2', undefined, 0, 3n);
    expect(names(q)).toEqual(['high', 'default', 'default2', 'low']);
    expect(q.take(2).map((e) => e.item)).toEqual(['high', 'default']);
    expect(names(q)).toEqual(['default2', 'low']);
    expect(q.size()).toBe(2);
  });

  it('rejects a priority above priority_levels with INVALID_ARG naming the model', () => {
    const q = new SchedulerQueue<string>('resnet', { priority_levels: 2, default_priority_level: 1 });
    expectStatus(() => q.enqueue('x', 3, 0, 0n), 'INVALID_ARG', /priority 3.*'resnet'/);
    expect(q.size()).toBe(0);
  });
});

describe('SchedulerQueue policies', () => {
  it('max_queue_size rejects UNAVAILABLE per level', () => {
    const q = new SchedulerQueue<string>('m', {
      priority_levels: 2,
      default_priority_level: 2,
      priority_queue_policy: { '1': { max_queue_size: 1 } },
      default_queue_policy: { max_queue_size: 2 },
    });
    q.enqueue('h1', 1, 0, 0n);
    expectStatus(() => q.enqueue('h2', 1, 0, 0n), 'UNAVAILABLE', /Exceeds maximum queue size/);
    q.enqueue('l1', 2, 0, 0n);
    q.enqueue('l2', 2, 0, 0n);
    expectStatus(() => q.enqueue('l3', 2, 0, 0n), 'UNAVAILABLE', /Exceeds maximum queue size/);
    q.take(1);
    q.enqueue('h3', 1, 0, 0n); // room again
    expect(names(q)).toEqual(['h3', 'l1', 'l2']);
  });

  it('REJECT: entries past default_timeout_microseconds leave the queue (strictly after the deadline)', () => {
    const q = new SchedulerQueue<string>('m', { default_queue_policy: { default_timeout_microseconds: 100 } });
    q.enqueue('a', 0, 0, 0n);
    q.enqueue('b', 0, 0, 50n * US);
    expect(q.nextDeadlineNs()).toBe(100n * US);
    expect(q.expire(100n * US)).toEqual([]);
    expect(q.expire(100n * US + 1n).map((e) => e.item)).toEqual(['a']);
    expect(names(q)).toEqual(['b']);
    expect(q.size()).toBe(1);
    expect(q.nextDeadlineNs()).toBe(150n * US);
  });

  it('no default timeout means no timeout', () => {
    const q = new SchedulerQueue<string>('m');
    q.enqueue('a', 0, 500, 0n);
    expect(q.nextDeadlineNs()).toBeUndefined();
    expect(q.expire(10n ** 15n)).toEqual([]);
  });

  it('a request timeout overrides only when allowed and only to shorten it', () => {
    const allowed = new SchedulerQueue<string>('m', {
      default_queue_policy: { default_timeout_microseconds: 1000, allow_timeout_override: true },
    });
    expect(allowed.enqueue('short', 0, 10, 0n).deadlineNs).toBe(10n * US);
    expect(allowed.enqueue('long', 0, 5000, 0n).deadlineNs).toBe(1000n * US);
    expect(allowed.enqueue('none', 0, 0, 0n).deadlineNs).toBe(1000n * US);
    const denied = new SchedulerQueue<string>('m', { default_queue_policy: { default_timeout_microseconds: 1000 } });
    expect(denied.enqueue('short', 0, 10, 0n).deadlineNs).toBe(1000n * US);
  });

  it('DELAY: a timed-out entry stays queued behind its level and never times out again', () => {
    const q = new SchedulerQueue<string>('m', {
      priority_levels: 2,
      default_priority_level: 1,
      priority_queue_policy: {
        '1': { timeout_action: 'DELAY', default_timeout_microseconds: 10 },
      },
    });
    q.enqueue('old', 1, 0, 0n);
    q.enqueue('low', 2, 0, 0n);
    q.enqueue('new', 1, 0, 5n * US);
    expect(q.expire(11n * US)).toEqual([]);
    expect(names(q)).toEqual(['new', 'old', 'low']);
    expect(q.ordered()[1]!.delayed).toBe(true);
    expect(q.nextDeadlineNs()).toBe(15n * US);
    // 'new' times out too and queues behind 'old', in the order they expired.
    expect(q.expire(16n * US)).toEqual([]);
    expect(names(q)).toEqual(['old', 'new', 'low']);
    expect(q.nextDeadlineNs()).toBeUndefined();
    expect(q.expire(10n ** 12n)).toEqual([]);
    expect(names(q)).toEqual(['old', 'new', 'low']);
    // A delayed entry still counts toward the size and can be removed.
    expect(q.size()).toBe(3);
    expect(q.remove(q.ordered()[1]!)).toBe(true);
    expect(names(q)).toEqual(['old', 'low']);
  });

  it('remove() takes out one entry and reports entries that are gone', () => {
    const q = new SchedulerQueue<string>('m');
    const a = q.enqueue('a', 0, 0, 0n);
    q.enqueue('b', 0, 0, 0n);
    expect(q.remove(a)).toBe(true);
    expect(q.remove(a)).toBe(false);
    expect(names(q)).toEqual(['b']);
    expect(q.size()).toBe(1);
  });
});
