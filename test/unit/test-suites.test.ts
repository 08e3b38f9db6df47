// test/suites.json sorts the test files into vitest's groups (vitest.config.ts):
// every path it names is an existing test file the config would pick up, no
// file is in two groups, each says why, and the scripts that run the groups
// (npm test, test:ci-extra, .ci/run) name them.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import suites from '../suites.json' with { type: 'json' };

const ROOT = path.resolve(import.meta.dirname, '../..');
const groups = { serial: suites.serial as Record<string, string>, ciExtra: suites.ciExtra as Record<string, string> };

describe('test suite groups (test/suites.json)', () => {
  it('names only existing test files, each with a reason', () => {
    for (const [group, files] of Object.entries(groups)) {
      for (const [file, why] of Object.entries(files)) {
        expect(file, `${group}: a test file under test/, not test/bench/`).toMatch(/^test\/(?!bench\/).+\.test\.ts$/);
        expect(fs.existsSync(path.join(ROOT, file)), `${group}: ${file} does not exist`).toBe(true);
        expect(why.trim().length, `${group}: ${file} says why`).toBeGreaterThan(5);
      }
    }
  });

  it('puts no file in two groups', () => {
    const both = Object.keys(groups.serial).filter((f) => f in groups.ciExtra);
    expect(both).toEqual([]);
  });

  it('npm test runs the parallel and serial groups, test:ci-extra the rest, and .ci/run runs both', () => {
    const { scripts } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(scripts.test).toMatch(/vitest run --project parallel --project serial$/);
    expect(scripts['test:ci-extra']).toBe('vitest run --project ci-extra');
    const ci = fs.readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
    expect(ci).toMatch(/^npm test$/m);
    expect(ci).toMatch(/^npm run test:ci-extra$/m);
  });
});
