// ONNX Runtime workers run a plain-JS bundle: none of the engine's execArgv
// (`--import tsx` under `npm run engine`, V8 flags a worker refuses) is passed
// on; a worker inheriting `--import tsx` started 3-7x slower. This test
// process runs with flags of its own (vitest's), so a worker inheriting them
// would report them.
import { describe, expect, it } from 'vitest';
import { spawnWorker } from '../../engine/backends/onnxruntime/spawn-worker.ts';

describe('spawnWorker', () => {
  it('starts the bundled worker with no execArgv of this process', async () => {
    expect(process.execArgv.length).toBeGreaterThan(0);
    const w = spawnWorker(new URL('../fixtures/exec-argv-worker.ts', import.meta.url), {});
    try {
      const argv = await new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      });
      expect(argv).toEqual([]);
    } finally {
      await w.terminate();
    }
  });
});
