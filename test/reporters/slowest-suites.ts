// Reporter: at the end of every run, the 10 slowest test files by wall time,
// with their CPU (from the setup file suite-cpu.ts: the file's process and
// its reaped children) and the group that ran them (test/suites.ts).
// TEST_TIMES_OUT=<file> writes every file's numbers as JSON, to compare runs.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

/** One test file's numbers, in ms. */
export interface SuiteTime {
  file: string;
  project: string;
  wallMs: number;
  cpuMs?: { self: number; children: number };
  tests: number;
  state: string;
}

const SHOWN = 10;

export default class SlowestSuites implements Reporter {
  private readonly started = new Map<string, number>();
  private readonly ended = new Map<string, number>();
  private runStart = Date.now();

  onTestRunStart(): void {
    this.runStart = Date.now();
  }

  onTestModuleStart(m: TestModule): void {
    this.started.set(m.id, Date.now());
  }

  onTestModuleEnd(m: TestModule): void {
    this.ended.set(m.id, Date.now());
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const rows: SuiteTime[] = modules.map((m) => {
      const d = m.diagnostic();
      const t0 = this.started.get(m.id);
      const t1 = this.ended.get(m.id);
      const cpu = (m.meta() as { cpuMs?: SuiteTime['cpuMs'] }).cpuMs;
      return {
        file: path.relative(process.cwd(), m.moduleId),
        project: m.project.name,
        // From the worker picking the file up to its end; the diagnostics' sum if the start was not seen.
        wallMs: Math.round(
          t0 !== undefined && t1 !== undefined
            ? t1 - t0
            : d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration,
        ),
        ...(cpu ? { cpuMs: cpu } : {}),
        tests: [...m.children.allTests()].length,
        state: m.state(),
      };
    });
    rows.sort((a, b) => b.wallMs - a.wallMs);
    const totalMs = Date.now() - this.runStart;
    const out = process.env.TEST_TIMES_OUT;
    if (out) writeFileSync(out, `${JSON.stringify({ totalMs, suites: rows }, null, 1)}\n`);
    if (rows.length < 2) return;
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    const lines = rows.slice(0, SHOWN).map((r) => {
      const cpu = r.cpuMs ? `cpu ${s(r.cpuMs.self)} + children ${s(r.cpuMs.children)}` : 'cpu n/a';
      return `  ${s(r.wallMs).padStart(8)}  ${cpu.padEnd(34)} ${r.project.padEnd(9)} ${r.file}`;
    });
    process.stdout.write(
      `\nslowest ${Math.min(SHOWN, rows.length)} of ${rows.length} test files (wall, CPU; whole run ${s(totalMs)}):\n${lines.join('\n')}\n`,
    );
  }
}
