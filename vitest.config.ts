import { defineConfig } from 'vitest/config';
import suites from './test/suites.json' with { type: 'json' };

// Three groups (test/suites.json says which file is where and why):
// - parallel: every file not listed, two at a time (two cores);
// - serial: one at a time after the parallel group, alone on the machine
//   (timing bounds, memory budgets, dist/ builds, Chromium, namespaces);
// both without `isolate`: a worker process runs file after file with one
// module cache, so the engine's modules are imported once per worker, not
// once per file (that import was a third of the run: 105 s of 598). A file
// must not rely on a fresh process: it stops what it starts and restores
// what it changes (env, timers, globals), as test/reporters/isolation-guard.ts
// checks after every file for the environment and fake timers;
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
    // Tests marked concurrent in one file (cases on their own connections, each waiting out a server's timer)
    // run this many at a time; vitest's default of 5 left most of such a file's waits one after another.
    maxConcurrency: 16,
    env: { ENGINE_QUIET: '1' },
    // The 10 slowest files at the end of every run (TEST_TIMES_OUT=<file>: all of them as JSON).
    reporters: ['default', './test/reporters/slowest-suites.ts'],
    setupFiles: ['./test/reporters/suite-cpu.ts', './test/reporters/isolation-guard.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'parallel',
          include: ALL,
          exclude: ['test/bench/**', 'node_modules/**', ...serial, ...ciExtra],
          maxWorkers: 2,
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        // Engine suites spawn worker threads running ONNX sessions; two cores.
        test: { name: 'serial', include: serial, maxWorkers: 1, isolate: false, sequence: { groupOrder: 1 } },
      },
      {
        extends: true,
        test: { name: 'ci-extra', include: ciExtra, maxWorkers: 1, sequence: { groupOrder: 2 } },
      },
    ],
  },
});
