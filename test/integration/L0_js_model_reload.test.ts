// Reloading a JS model does not keep earlier copies of its code: a child
// engine (with --expose-gc) unloads and loads a JS model 50 times; weak
// references to each copy's data show only the loaded copy alive, and the
// heap stays flat. Runs test/fixtures/js-reload-heap.ts.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers.ts';

const run = promisify(execFile);

describe('JS model reloads', () => {
  it('keeps one copy of the model alive and the heap flat over 50 reloads', async () => {
    const { stdout } = await run(
      process.execPath,
      ['--expose-gc', '--import', 'tsx', path.join(ROOT, 'test/fixtures/js-reload-heap.ts'), 'engine', '50', 'big'],
      {
        cwd: ROOT,
        env: { ...process.env, ENGINE_QUIET: '1' },
        timeout: 120_000,
      },
    );
    const r = JSON.parse(stdout.trim().split('\n').pop()!) as {
      samples: Array<{ reloads: number; heapMiB: number; aliveCopies: number }>;
      loadedCopies: number;
      aliveAfterStop: number;
    };
    expect(r.loadedCopies).toBe(51); // every load evaluated the file anew
    for (const s of r.samples) expect(s.aliveCopies, `after ${s.reloads} reloads`).toBe(1);
    expect(r.aliveAfterStop).toBe(0);
    const at = (n: number) => r.samples.find((s) => s.reloads === n)!.heapMiB;
    // Each leaked copy would hold a 30k-entry table (~0.24 MiB): 40 leaked copies ~10 MiB.
    expect(at(50) - at(10)).toBeLessThan(2);
  }, 150_000);
});
