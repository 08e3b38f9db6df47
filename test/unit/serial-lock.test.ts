// common/serial-lock.ts: sections run one at a time in call order, a
// section that throws does not block the next, and each caller sees its own
// section's outcome.
import { describe, expect, it } from 'vitest';
import { SerialLock } from '../../common/serial-lock.ts';

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('SerialLock', () => {
  it('runs sections one at a time, in call order', async () => {
    const lock = new SerialLock();
    const events: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const a = lock.run(async () => {
      events.push('a start');
      await gate;
      events.push('a end');
      return 'A';
    });
    const b = lock.run(() => {
      events.push('b');
      return 'B';
    });
    await tick();
    expect(events).toEqual(['a start']);
    expect(lock.pending).toBe(2);
    release();
    expect(await a).toBe('A');
    expect(await b).toBe('B');
    expect(events).toEqual(['a start', 'a end', 'b']);
    await tick();
    expect(lock.pending).toBe(0);
  });

  it('a section that throws rejects its own caller and does not block the next', async () => {
    const lock = new SerialLock();
    const bad = lock.run(async () => {
      throw new Error('boom');
    });
    const sync = lock.run(() => {
      throw new Error('sync boom');
    });
    const good = lock.run(async () => 7);
    await expect(bad).rejects.toThrow('boom');
    await expect(sync).rejects.toThrow('sync boom');
    await expect(good).resolves.toBe(7);
  });

  it('a section never starts while an earlier one that failed is still running', async () => {
    const lock = new SerialLock();
    let running = 0;
    let most = 0;
    const section = async (fail: boolean) => {
      running++;
      most = Math.max(most, running);
      await tick();
      running--;
      if (fail) throw new Error('x');
    };
    await Promise.allSettled([true, false, true, false].map((f) => lock.run(() => section(f))));
    expect(most).toBe(1);
  });
});
