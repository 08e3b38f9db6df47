import { describe, expect, it } from 'vitest';
import { SliceAllocator } from '../../gateway/staging/slice-allocator.ts';

describe('SliceAllocator', () => {
  it('hands out aligned, non-overlapping blocks until full', () => {
    const a = new SliceAllocator(1024, 64);
    const b1 = a.alloc(10)!;
    const b2 = a.alloc(100)!;
    expect(b1).toEqual({ offset: 0, size: 64 });
    expect(b2).toEqual({ offset: 64, size: 128 });
    expect(a.bytesInUse).toBe(192);
    expect(a.alloc(1024 - 192 + 1)).toBeNull();
    expect(a.alloc(1024 - 192)).toEqual({ offset: 192, size: 832 });
    expect(a.alloc(1)).toBeNull();
  });

  it('coalesces freed neighbours so the whole region is usable again', () => {
    const a = new SliceAllocator(4096, 64);
    const blocks = [a.alloc(1000)!, a.alloc(1000)!, a.alloc(1000)!];
    expect(a.alloc(2048)).toBeNull();
    a.release(blocks[0]!.offset);
    a.release(blocks[2]!.offset);
    expect(a.largestFree).toBeLessThan(4096);
    a.release(blocks[1]!.offset);
    expect(a.largestFree).toBe(4096);
    expect(a.bytesInUse).toBe(0);
    expect(a.alloc(4096)).toEqual({ offset: 0, size: 4096 });
  });

  it('reuses a freed hole first-fit', () => {
    const a = new SliceAllocator(1024, 64);
    const x = a.alloc(64)!;
    a.alloc(64);
    a.release(x.offset);
    expect(a.alloc(64)!.offset).toBe(0);
  });

  it('refuses double frees and unknown offsets', () => {
    const a = new SliceAllocator(1024);
    const x = a.alloc(1)!;
    a.release(x.offset);
    expect(() => a.release(x.offset)).toThrow(/no live block at offset 0/);
    expect(() => a.release(5)).toThrow(/offset 5/);
  });

  it('random alloc/free keeps accounting exact and blocks disjoint', () => {
    const a = new SliceAllocator(1 << 16, 64);
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const live: Array<{ offset: number; size: number }> = [];
    for (let i = 0; i < 2000; i++) {
      if (live.length && rnd() < 0.45) {
        const [b] = live.splice(Math.floor(rnd() * live.length), 1);
        a.release(b!.offset);
      } else {
        const b = a.alloc(1 + Math.floor(rnd() * 3000));
        if (b) live.push(b);
      }
      const sorted = [...live].sort((p, q) => p.offset - q.offset);
      for (let j = 1; j < sorted.length; j++) expect(sorted[j]!.offset).toBeGreaterThanOrEqual(sorted[j - 1]!.offset + sorted[j - 1]!.size);
      expect(a.bytesInUse).toBe(live.reduce((n, b) => n + b.size, 0));
    }
    for (const b of live) a.release(b.offset);
    expect(a.largestFree).toBe(1 << 16);
  });
});
