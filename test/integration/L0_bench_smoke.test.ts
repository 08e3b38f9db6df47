// Smoke test of the benchmark suite: `test/bench/run.ts --quick` as a child
// process writing into a temp dir (never the tracked results). It asserts
// only that every row and every ratio of the report came out with numbers,
// and that the chart was written; no timing is judged here.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROW_INFO } from '../bench/context.ts';
import { ROOT } from '../bench/processes.ts';

const NUM = /^-?\d+(\.\d+)?$/;

let outDir: string;
let report = '';
let exitCode: number | null = null;
let stderr = '';

/** Cells of the Markdown table row that contains `needle` (first match), or undefined. */
function cellsOf(md: string, needle: string): string[] | undefined {
  const line = md.split('\n').find((l) => l.startsWith('|') && l.includes(needle));
  return line?.split('|').slice(1, -1).map((c) => c.trim());
}

/** The table rows of the section whose heading starts with `heading`. */
function sectionRows(md: string, heading: string): string[][] {
  const start = md.indexOf(`## ${heading}`);
  if (start < 0) return [];
  const rest = md.slice(start + 3);
  const end = rest.indexOf('\n## ');
  const lines = (end < 0 ? rest : rest.slice(0, end)).split('\n').filter((l) => l.startsWith('|'));
  return lines.slice(2).map((l) => l.split('|').slice(1, -1).map((c) => c.trim()));
}

describe('L0_bench_smoke: npm run bench -- --quick', () => {
  beforeAll(async () => {
    outDir = mkdtempSync(path.join(os.tmpdir(), 'bench-smoke-'));
    exitCode = await new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/run.ts', '--quick', '--out', outDir], {
        cwd: ROOT,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-6000)));
      const timer = setTimeout(() => child.kill('SIGTERM'), 200_000);
      child.on('exit', (code) => {
        clearTimeout(timer);
        resolve(code);
      });
    });
    const file = path.join(outDir, 'latest.md');
    if (existsSync(file)) report = readFileSync(file, 'utf8');
  }, 210_000);

  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it('exits 0 and writes the report and the chart into --out', () => {
    expect(exitCode, stderr).toBe(0);
    expect(report).toMatch(/^# Benchmark report/);
    expect(report).toContain(`| Node | ${process.version} |`);
    const svg = readFileSync(path.join(outDir, 'latest.svg'), 'utf8');
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

  it('has the paper\'s numbers beside (a)-(c), labelled as not measured here', () => {
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

  it('has engine CPU per inference for every path (a number, or why its C client is missing) and each target judged', () => {
    const rows = sectionRows(report, '6. Engine CPU per inference');
    const end = rows.findIndex(([first]) => first === 'target');
    const paths = rows.slice(0, end < 0 ? rows.length : end);
    const labels = paths.map(([label]) => label!);
    for (const want of ['inline over gRPC', 'inline over HTTP', 'client shm', 'product_recommender_model (256 B in), dynamic batching, over gRPC', 'over HTTP (binary extension)', '10 MiB']) {
      expect(labels.some((l) => l.includes(want)), `CPU row '${want}' missing: ${labels.join(' / ')}`).toBe(true);
    }
    for (const [label, cpu] of paths) {
      expect(NUM.test(cpu!) || /^not measured: (h2load|wrk) not installed/.test(cpu!), `${label}: ${cpu}`).toBe(true);
    }
    expect(report).toMatch(/\| encoder: inline gRPC vs inputs in shm \|/);
  });

  it('has a Node floor (a number, or why its C client is missing) for each protocol and body, and floors beside the targets', () => {
    const rows = sectionRows(report, '6. Engine CPU per inference');
    const floors = rows.filter(([label]) => /^(grpc-js|node:http2|node:http): /.test(label!));
    expect(floors.length, rows.map(([l]) => l).join(' / ')).toBe(9);
    for (const [label, cpu] of floors) {
      expect(NUM.test(cpu!) || /^not measured: (h2load|wrk) not installed/.test(cpu!), `${label}: ${cpu}`).toBe(true);
    }
    const tiny = cellsOf(report, '| tiny model over gRPC');
    expect(tiny?.[5], 'floor cell of the tiny gRPC target').toMatch(/grpc-js floor|not measured/);
  });

  it('has the memory table with the engine and the per-model processes', () => {
    const rows = sectionRows(report, '5. Resident memory');
    expect(rows.some(([p]) => p!.startsWith('engine'))).toBe(true);
    expect(rows.filter(([p]) => p!.startsWith('per-model server')).length).toBe(4);
    for (const [, , mib] of rows) expect(Number(mib)).toBeGreaterThan(10);
  });
});
