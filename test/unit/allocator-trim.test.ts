// native/allocator-trim.ts: the periodic malloc_trim both processes run (--allocator-trim-secs).
import { describe, expect, it } from 'vitest';
import { startAllocatorTrim } from '../../native/allocator-trim.ts';

const until = async (ok: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (!ok() && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
};

describe('allocator trim', () => {
  it('trims every interval until stopped, each in a few milliseconds', async () => {
    const trim = startAllocatorTrim(10);
    await until(() => trim.trims >= 3, 2000);
    trim.stop();
    const done = trim.trims;
    expect(done).toBeGreaterThanOrEqual(3);
    expect(trim.slowestMs).toBeLessThan(500);
    await new Promise((r) => setTimeout(r, 50));
    expect(trim.trims).toBe(done);
  });

  it('0 means never', async () => {
    const trim = startAllocatorTrim(0);
    await new Promise((r) => setTimeout(r, 30));
    expect(trim.trims).toBe(0);
    trim.stop();
  });
});
