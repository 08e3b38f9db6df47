import { defineConfig } from 'vitest/config';
import suites from './test/suites.json' with { type: 'json' };

// Three groups (test/suites.json says which file is where and why):
// - parallel: every file not listed, two at a time (two cores);
// - serial: one at a time after the parallel group, alone on the machine
//   (timing bounds, memory budgets, dist/ builds, Chromium, namespaces);
// - ci-extra: not in `npm test` (its script names the other two); `npm run
//   test:ci-extra` runs it, and .ci/run runs that.
const serial = Object.keys(suites.serial);
const ciExtra = Object.keys(suites.ciExtra);
const ALL = ['test/**/*.test.ts'];

export default defineConfig({
  test: {
    exclude: ['test/bench/**', 'node_modules/**'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    env: { ENGINE_QUIET: '1' },
    // The 10 slowest files at the end of every run (TEST_TIMES_OUT=<file>: all of them as JSON).
    reporters: ['default', './test/reporters/slowest-suites.ts'],
    setupFiles: ['./test/reporters/suite-cpu.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'parallel',
          include: ALL,
          exclude: ['test/bench/**', 'node_modules/**', ...serial, ...ciExtra],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        // Engine suites spawn worker threads running ONNX sessions; two cores.
        test: { name: 'serial', include: serial, maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
      {
        extends: true,
        test: { name: 'ci-extra', include: ciExtra, maxWorkers: 1, sequence: { groupOrder: 2 } },
      },
    ],
  },
});
