// Smoke test of the benchmark suite: `test/bench/run.ts --quick` as a child
// process writing into a temp dir (never the tracked results). It asserts
// only that every row and every ratio of the report came out with numbers,
// and that the chart was written; no timing is judged here. Section 6 loads
// the engine from two C clients, wrk and h2load (Debian nghttp2-client), that
// a newcomer may not have: the full run uses whichever this machine has, and
// `--only cpu` runs cover every other combination reachable here by hiding
// installed ones from PATH; in each, a cell of a row whose client is missing
// must say "not measured: <tool> not installed ...", never be empty.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { H2LOAD_MISSING, which, WRK_MISSING } from '../bench/c-clients.ts';
import { ROW_INFO } from '../bench/context.ts';
import { ROOT } from '../bench/processes.ts';
import { pathWithout } from '../fixtures/path-without.ts';

const NUM = /^-?\d+(\.\d+)?$/;

type Tool = 'wrk' | 'h2load';
const TOOLS: Tool[] = ['wrk', 'h2load'];
const MISSING: Record<Tool, string> = { wrk: WRK_MISSING, h2load: H2LOAD_MISSING };
/** The load generators on this machine's PATH. */
const INSTALLED = TOOLS.filter((t) => which(t) !== undefined);

interface BenchRun {
  exitCode: number | null;
  stderr: string;
  report: string;
  svg?: string;
}

/** Run the bench (`--quick` plus `args`) as a child process with `env`, into a temp dir; its report. */
async function runBench(args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<BenchRun> {
  const outDir = mkdtempSync(path.join(os.tmpdir(), 'bench-smoke-'));
  try {
    let stderr = '';
    const exitCode = await new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/run.ts', '--quick', ...args, '--out', outDir], {
        cwd: ROOT,
        env,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-6000)));
      const timer = setTimeout(() => {
        stderr += `\nL0_bench_smoke: stopped after ${timeoutMs / 1000} s (still running)`;
        child.kill('SIGTERM');
      }, timeoutMs);
      child.on('exit', (code) => {
        clearTimeout(timer);
        resolve(code);
      });
    });
    const read = (name: string) => (existsSync(path.join(outDir, name)) ? readFileSync(path.join(outDir, name), 'utf8') : undefined);
    return { exitCode, stderr, report: read('latest.md') ?? '', svg: read('latest.svg') };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

/** Cells of the Markdown table row that contains `needle` (first match), or undefined. */
function cellsOf(md: string, needle: string): string[] | undefined {
  const line = md.split('\n').find((l) => l.startsWith('|') && l.includes(needle));
  return line
    ?.split('|')
    .slice(1, -1)
    .map((c) => c.trim());
}

/** The tables of the section whose heading starts with `heading`: each its header and body rows. */
function sectionTables(md: string, heading: string): Array<{ head: string[]; rows: string[][] }> {
  const start = md.indexOf(`## ${heading}`);
  if (start < 0) return [];
  const rest = md.slice(start + 3);
  const end = rest.indexOf('\n## ');
  const tables: string[][][] = [];
  let prev = '';
  for (const l of (end < 0 ? rest : rest.slice(0, end)).split('\n')) {
    if (l.startsWith('|')) {
      if (!prev.startsWith('|')) tables.push([]);
      tables.at(-1)!.push(
        l
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim()),
      );
    }
    prev = l;
  }
  return tables.map(([head, , ...rows]) => ({ head: head!, rows }));
}

/** The body rows of the section's first table. */
const sectionRows = (md: string, heading: string): string[][] => sectionTables(md, heading)[0]?.rows ?? [];

/** Every table cell of the report: none may be empty, and each "not measured" says why. */
function expectEveryCellFilled(report: string): void {
  const lines = report.split('\n').filter((l) => l.startsWith('|'));
  expect(lines.length).toBeGreaterThan(50);
  for (const l of lines) {
    const cells = l
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    expect(
      cells.every((c) => c !== ''),
      `empty cell in: ${l}`,
    ).toBe(true);
    for (const c of cells) if (/not measured(?! here)/.test(c)) expect(c, l).toMatch(/not measured: \S/);
  }
}

/** What each CPU target reads (its rows' load generators), by the start of its name, and the client of its floors. */
const TARGET_TOOLS: Array<[string, Tool[], Tool | undefined]> = [
  ['encoder: inline gRPC vs inputs in shm', ['h2load'], 'h2load'],
  ['encoder: inline HTTP binary vs inputs in shm', ['wrk', 'h2load'], 'wrk'],
  ['10 MiB inline gRPC vs one 10 MiB copy', ['h2load'], 'h2load'],
  ['10 MiB inline gRPC from grpc-js vs one 10 MiB copy', [], 'h2load'],
  ['10 MiB inline HTTP vs one 10 MiB copy', ['wrk'], 'wrk'],
  ['tiny model over gRPC (ms per inference)', ['h2load'], 'h2load'],
  ['tiny model over HTTP (ms per inference)', ['wrk'], 'wrk'],
];

/**
 * Section 6 with `present` load generators on PATH: every row there whatever is missing; a row whose
 * client is present has numbers, one whose client is missing says so in every cell that would hold one.
 */
function expectCpuSection(report: string, present: Tool[]): void {
  const has = (t: Tool) => present.includes(t);
  /** The value cells of a row loaded by `tool` (undefined: a Node client, always there). */
  const expectRow = (what: string, cells: string[], tool: Tool | undefined) => {
    if (tool && !has(tool)) for (const c of cells) expect(c, what).toBe(`not measured: ${MISSING[tool]}`);
    else
      expect(
        cells.slice(0, 3).every((c) => NUM.test(c)),
        `${what}: ${cells.join(' | ')}`,
      ).toBe(true);
  };
  const tables = sectionTables(report, '6. Engine CPU per inference');
  const byHead = (first: string, second?: string) =>
    tables.find(({ head }) => head[0] === first && (!second || head[1] === second))?.rows ?? [];

  const engine = byHead('path', 'engine CPU ms / inference');
  const labels = engine.map(([label]) => label!);
  for (const want of [
    'inline over gRPC',
    'inline over HTTP',
    'client shm',
    'product_recommender_model (256 B in), dynamic batching, over gRPC',
    'over HTTP (binary extension)',
    '10 MiB',
  ]) {
    expect(
      labels.some((l) => l.includes(want)),
      `CPU row '${want}' missing: ${labels.join(' / ')}`,
    ).toBe(true);
  }
  expect(engine.length).toBe(9);
  for (const [label, ...cells] of engine)
    expectRow(label!, cells, label!.includes('(Node client)') ? undefined : label!.includes('over gRPC') ? 'h2load' : 'wrk');

  const targets = byHead('target');
  expect(targets.map(([name]) => TARGET_TOOLS.findIndex(([start]) => name!.startsWith(start)))).toEqual(TARGET_TOOLS.map((_, i) => i));
  for (const [[name, measured, value, target, met, floor], [, needs, floorTool]] of targets.map((r, i) => [r, TARGET_TOOLS[i]!] as const)) {
    const hidden = needs.filter((t) => !has(t));
    if (hidden.length) {
      for (const c of target === '—' ? [measured, value] : [measured, value, met]) {
        expect(c, name).toMatch(/^not measured: /);
        for (const t of hidden) expect(c, name).toContain(MISSING[t]);
      }
    } else {
      expect(value, name).toMatch(NUM);
      expect(met, name).toMatch(target === '—' ? /^—$/ : /^\*\*(met|not met)\*\*$/);
    }
    if (!floorTool) expect(floor, name).toBe('—');
    else if (has(floorTool)) expect(floor, name).toMatch(/^(grpc-js|node:http) floor \d/);
    else expect(floor, name).toMatch(new RegExp(`floors? not measured: ${MISSING[floorTool].replace(/[()]/g, '\\$&')}$`));
  }
  expect(report).toMatch(/\| encoder: inline gRPC vs inputs in shm \|/);

  const gateway = byHead('path', 'front process CPU ms / call');
  expect(gateway.map(([label]) => label!.split(' ')[0])).toEqual(['gateway', 'gateway', 'gateway', 'FastAPI', 'floor', 'floor']);
  for (const [label, ...cells] of gateway) {
    // The FastAPI peer needs Debian's python3-fastapi & co. (not in .ci/run): measured, or "not measured: <why>".
    if (label!.startsWith('FastAPI') && has('wrk') && cells[0]!.startsWith('not measured: '))
      expect(cells[0]).toMatch(/^not measured: .*python3-fastapi/);
    else expectRow(label!, cells.slice(0, has('wrk') ? 3 : 4), 'wrk');
  }

  const floors = byHead('floor: server, body, client');
  expect(
    floors.filter(([label]) => /^(grpc-js|node:http2|own HTTP\/2|node:http): /.test(label!)).length,
    floors.map(([l]) => l).join(' / '),
  ).toBe(12);
  for (const [label, ...cells] of floors) expectRow(label!, cells, label!.includes(', h2load, ') ? 'h2load' : 'wrk');

  for (const t of TOOLS) {
    if (has(t)) expect(report, `${t} is on PATH`).not.toContain(MISSING[t]);
    else expect(report).toContain(MISSING[t]);
  }
}

describe('L0_bench_smoke: npm run bench -- --quick', () => {
  let run: BenchRun;
  let report = '';

  beforeAll(async () => {
    // A ceiling, not a time to beat: about 4 minutes on a quiet host, over 8 with the machine's load above 10.
    run = await runBench([], process.env, 1_500_000);
    report = run.report;
  }, 1_510_000);

  it('exits 0 and writes the report and the chart into --out', () => {
    expect(run.exitCode, run.stderr).toBe(0);
    expect(report).toMatch(/^# Benchmark report/);
    expect(report).toContain(`| Node | ${process.version} |`);
    const svg = run.svg ?? '';
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('</svg>');
  });

  it('has every load row with numeric p50, p95 and throughput', () => {
    for (const [id, { label }] of Object.entries(ROW_INFO)) {
      const cells = cellsOf(report, label);
      expect(cells, `row ${id} (${label}) missing`).toBeDefined();
      const numbers = cells!.filter((c) => NUM.test(c));
      expect(numbers.length, `row ${id} has no numbers: ${cells!.join(' | ')}`).toBeGreaterThanOrEqual(3);
      expect(cells!.join(' '), `row ${id}`).not.toContain('not measured');
    }
  });

  it("has the paper's numbers beside (a)-(c), labelled as not measured here", () => {
    expect(report).toContain('paper (not measured here)');
    for (const n of ['450', '420', '780']) expect(report).toContain(`| ${n} |`);
  });

  it('has every ratio with a numeric value, and a verdict for each target', () => {
    const rows = sectionRows(report, '3. Ratios');
    expect(rows.length).toBeGreaterThanOrEqual(14);
    for (const [name, , value, target, met] of rows) {
      expect(value, `ratio '${name}'`).toMatch(NUM);
      if (target !== '—') expect(met, `ratio '${name}'`).toMatch(/\*\*(met|not met)\*\*/);
    }
  });

  it(`has section 6 with what this machine's load generators (${INSTALLED.join(', ') || 'none'}) measure, and why the rest was not`, () => {
    expectCpuSection(report, INSTALLED);
  });

  it('leaves no table cell empty, and every "not measured" says why', () => {
    expectEveryCellFilled(report);
  });

  it('has the memory table with the engine and the per-model processes', () => {
    const rows = sectionRows(report, '5. Resident memory');
    expect(rows.some(([p]) => p!.startsWith('engine'))).toBe(true);
    expect(rows.filter(([p]) => p!.startsWith('per-model server')).length).toBe(4);
    for (const [, , mib] of rows) expect(Number(mib)).toBeGreaterThan(10);
  });
});

// The other combinations of the two load generators, by hiding installed ones
// from PATH (a combination needing one this machine lacks is skipped: .ci/run
// installs both). Section 6 alone (`--only cpu`); the full run above covers the
// combination this machine has.
const COMBOS: Tool[][] = [['wrk', 'h2load'], ['wrk'], ['h2load'], []];
describe.each(
  COMBOS.filter((c) => c.join() !== INSTALLED.join()).map(
    (present) => [present.join(' and ') || 'neither wrk nor h2load', present] as const,
  ),
)('L0_bench_smoke: --only cpu with %s on PATH', (_name, present) => {
  const reachable = present.every((t) => INSTALLED.includes(t));
  let run: BenchRun;
  let shadow: string;

  beforeAll(async () => {
    if (!reachable) return;
    shadow = mkdtempSync(path.join(os.tmpdir(), 'bench-smoke-path-'));
    const PATH = pathWithout(
      TOOLS.filter((t) => !present.includes(t)),
      shadow,
    );
    for (const t of TOOLS)
      expect(
        PATH.split(':').some((d) => existsSync(path.join(d, t))),
        `${t} on the shadow PATH`,
      ).toBe(present.includes(t));
    run = await runBench(['--only', 'cpu'], { ...process.env, PATH }, 900_000);
  }, 910_000);

  afterAll(() => {
    if (shadow) rmSync(shadow, { recursive: true, force: true });
  });

  it.skipIf(!reachable)('exits 0 with section 6 measured by what is on PATH and every other cell saying which tool is missing', () => {
    expect(run.exitCode, run.stderr).toBe(0);
    expectCpuSection(run.report, present);
    expectEveryCellFilled(run.report);
  });
});
