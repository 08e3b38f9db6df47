import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/bench/**', 'node_modules/**'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Engine suites spawn worker threads running ONNX sessions; two cores.
    fileParallelism: false,
    env: { ENGINE_QUIET: '1' },
  },
});
