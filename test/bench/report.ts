// The bench report: a Markdown document with every table (machine, the
// paper's table side by side, open-loop latency, ratios with their targets,
// every measured row, memory) and a hand-made SVG bar chart of the pipeline
// throughputs. Pure functions of the collected results. Section 6 (CPU per
// inference and its Node floors) is rendered by report-cpu.ts.
import os from 'node:os';
import type { LoadResult } from './load-generator.ts';
import { renderCpu, type CpuRow, type GatewayCpuRow } from './report-cpu.ts';
import { f1, f2, f3, notMeasured, table } from './report-table.ts';

/** One measured (or skipped) load row. */
export interface Row {
  id: string;
  label: string;
  /** How it was loaded, e.g. "closed loop, 16 clients". */
  load: string;
  result?: LoadResult;
  /** Why it was not measured. */
  skipped?: string;
  note?: string;
}

/** One ratio with its target (when the issue sets one). */
export interface Ratio {
  name: string;
  /** The two sides, already formatted. */
  measured: string;
  value: number | undefined;
  /** e.g. "≥ 2×"; absent when no target is set. */
  target?: string;
  met?: boolean;
  skipped?: string;
}

export interface MemoryRow {
  process: string;
  models: string;
  rssMiB: number;
}

export interface ReportData {
  quick: boolean;
  startedAt: Date;
  seconds: number;
  loadBefore: number[];
  loadAfter: number[];
  settings: string[];
  pipeline: Row[];
  openLoop: Row[];
  ratios: Ratio[];
  rows: Row[];
  memory: MemoryRow[];
  cpu: CpuRow[];
  /** The same clients and bodies against a Node server that does nothing. */
  floors: CpuRow[];
  gatewayCpu: GatewayCpuRow[];
  /** Median ms to copy 10 MiB once in the bench process (yardstick of the 10 MiB row). */
  copyMs?: number;
  notes: string[];
}

/** The seed's quoted numbers (not measured here). */
export const PAPER: Record<string, { p50: number; p95: number; rps: number; name: string }> = {
  a: { name: 'FastAPI (CPU)', p50: 22, p95: 45, rps: 450 },
  b: { name: 'Triton, no batching', p50: 28, p95: 52, rps: 420 },
  c: { name: 'Triton, dynamic batching 16', p50: 34, p95: 60, rps: 780 },
};

function rowCells(r: Row): string[] {
  if (!r.result) return notMeasured(r.skipped ?? 'unknown', 4);
  const x = r.result;
  return [f2(x.p50), f2(x.p95), f1(x.throughput), `${x.requests}${x.errors ? ` (${x.errors} errors)` : ''}`];
}

export function renderMarkdown(d: ReportData): string {
  const cpus = os.cpus();
  const out: string[] = [];
  out.push(`# Benchmark report${d.quick ? ' (quick run: short windows, smoke only)' : ''}`, '');
  out.push(
    table(
      ['machine', 'value'],
      [
        ['date', d.startedAt.toISOString()],
        ['CPU', `${cpus[0]?.model ?? 'unknown'} × ${cpus.length} cores`],
        ['RAM', `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`],
        ['OS', `${os.type()} ${os.release()} (${os.arch()})`],
        ['Node', process.version],
        ['load average before / after (1 min)', `${f2(d.loadBefore[0])} / ${f2(d.loadAfter[0])}`],
        ['run time', `${d.seconds.toFixed(0)} s`],
      ],
    ),
    '',
  );
  out.push('Settings:', '', ...d.settings.map((s) => `- ${s}`), '');

  out.push("## 1. The paper's table, side by side", '');
  out.push(
    "Image-search pipeline, JPEG in, 512-d vector out. Latencies in ms, throughput in requests/s. The paper's columns are the numbers quoted in the seed, **not measured here** (other hardware, other models).",
    '',
  );
  out.push(
    table(
      ['row', 'p50 ms', 'p95 ms', 'req/s', 'requests', 'paper (not measured here)', 'paper p50', 'paper p95', 'paper req/s'],
      d.pipeline.map((r) => {
        const p = PAPER[r.id];
        return [
          `(${r.id}) ${r.label}`,
          ...rowCells(r),
          p?.name ?? '—',
          p ? String(p.p50) : '—',
          p ? String(p.p95) : '—',
          p ? String(p.rps) : '—',
        ];
      }),
    ),
    '',
  );
  for (const r of d.pipeline) if (r.note) out.push(`- (${r.id}): ${r.note}`);
  out.push('', `Load: ${d.pipeline[0]?.load ?? ''}.`, '');

  out.push('## 2. Open loop: latency at a fixed arrival rate', '');
  out.push("Latency runs from each request's scheduled send time (no coordinated omission).", '');
  out.push(
    table(
      ['row', 'load', 'p50 ms', 'p95 ms', 'p99 ms', 'done/s'],
      d.openLoop.map((r) => {
        if (!r.result) return [r.label, r.load, ...notMeasured(r.skipped ?? 'unknown', 4)];
        return [r.label, r.load, f2(r.result.p50), f2(r.result.p95), f2(r.result.p99), f1(r.result.throughput)];
      }),
    ),
    '',
  );

  out.push('## 3. Ratios (each from this run) and targets', '');
  out.push(
    table(
      ['ratio', 'measured', 'value', 'target', 'met?'],
      d.ratios.map((r) =>
        r.skipped
          ? [r.name, ...notMeasured(r.skipped, 2), r.target ?? '—', r.target ? notMeasured(r.skipped, 1)[0]! : '—']
          : [
              r.name,
              r.measured,
              r.value === undefined ? 'n/a' : `${f3(r.value)}`,
              r.target ?? '—',
              r.target ? (r.met ? '**met**' : '**not met**') : '—',
            ],
      ),
    ),
    '',
  );

  out.push('## 4. Every measured row', '');
  out.push(
    table(
      ['row', 'load', 'p50 ms', 'p95 ms', 'throughput', 'requests'],
      d.rows.map((r) => [r.label, r.load, ...rowCells(r)]),
    ),
    '',
  );
  for (const r of d.rows) if (r.note) out.push(`- ${r.label}: ${r.note}`);
  out.push('');

  out.push('## 5. Resident memory (VmRSS, all models loaded and warmed)', '');
  out.push(
    table(
      ['process', 'models', 'VmRSS MiB'],
      d.memory.map((m) => [m.process, m.models, f1(m.rssMiB)]),
    ),
    '',
  );

  out.push(...renderCpu(d.cpu, d.floors, d.copyMs, d.gatewayCpu), '');

  if (d.notes.length) out.push('## Notes', '', ...d.notes.map((n) => `- ${n}`), '');
  return out.join('\n');
}

/** Chart labels of the pipeline rows. */
const SHORT: Record<string, string> = {
  a: 'baseline: server per model, JSON',
  b: 'engine, batching off',
  c: 'engine, dynamic batching',
  d: 'gateway /fn → engine (c)',
};

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A grouped bar chart: measured throughput of (a)-(d), the paper's (a)-(c) beside it in grey. */
export function renderSvg(d: ReportData): string {
  const W = 720;
  const H = 360;
  const left = 60;
  const bottom = 300;
  const top = 50;
  const groups = d.pipeline;
  const values = groups.flatMap((r) => [r.result?.throughput ?? 0, PAPER[r.id]?.rps ?? 0]);
  const max = Math.max(1, ...values) * 1.15;
  const gw = (W - left - 20) / Math.max(1, groups.length);
  const bw = gw * 0.32;
  const y = (v: number) => bottom - ((bottom - top) * v) / max;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
  );
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">Image-search pipeline throughput (req/s)${d.quick ? ' — quick run' : ''}</text>`,
  );
  parts.push(
    `<text x="${W / 2}" y="40" text-anchor="middle" fill="#555">${esc(`${d.startedAt.toISOString().slice(0, 10)}, ${os.cpus().length} cores, ${d.pipeline[0]?.load ?? ''}`)}</text>`,
  );
  for (let i = 0; i <= 4; i++) {
    const v = (max / 1.15) * (i / 4);
    parts.push(`<line x1="${left}" x2="${W - 20}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#ddd"/>`);
    parts.push(`<text x="${left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" fill="#555">${v.toFixed(0)}</text>`);
  }
  groups.forEach((r, i) => {
    const x0 = left + i * gw + gw * 0.15;
    const m = r.result?.throughput;
    if (m !== undefined) {
      parts.push(
        `<rect x="${x0.toFixed(1)}" y="${y(m).toFixed(1)}" width="${bw.toFixed(1)}" height="${(bottom - y(m)).toFixed(1)}" fill="#2b6cb0"/>`,
      );
      parts.push(`<text x="${(x0 + bw / 2).toFixed(1)}" y="${(y(m) - 4).toFixed(1)}" text-anchor="middle">${f1(m)}</text>`);
    } else {
      parts.push(`<text x="${(x0 + bw / 2).toFixed(1)}" y="${bottom - 6}" text-anchor="middle" fill="#b00">n/m</text>`);
    }
    const p = PAPER[r.id]?.rps;
    if (p !== undefined) {
      const x1 = x0 + bw + 4;
      parts.push(
        `<rect x="${x1.toFixed(1)}" y="${y(p).toFixed(1)}" width="${bw.toFixed(1)}" height="${(bottom - y(p)).toFixed(1)}" fill="#bbb"/>`,
      );
      parts.push(`<text x="${(x1 + bw / 2).toFixed(1)}" y="${(y(p) - 4).toFixed(1)}" text-anchor="middle" fill="#777">${p}</text>`);
    }
    parts.push(`<text x="${(x0 + bw).toFixed(1)}" y="${bottom + 18}" text-anchor="middle">(${r.id})</text>`);
    parts.push(
      `<text x="${(x0 + bw).toFixed(1)}" y="${bottom + 33}" text-anchor="middle" fill="#555" font-size="11">${esc(SHORT[r.id] ?? r.id)}</text>`,
    );
  });
  parts.push(`<line x1="${left}" x2="${W - 20}" y1="${bottom}" y2="${bottom}" stroke="#333"/>`);
  parts.push(
    `<rect x="${left}" y="${H - 18}" width="10" height="10" fill="#2b6cb0"/><text x="${left + 14}" y="${H - 9}">measured here</text>`,
  );
  parts.push(
    `<rect x="${left + 120}" y="${H - 18}" width="10" height="10" fill="#bbb"/><text x="${left + 134}" y="${H - 9}">the paper's numbers (other hardware; not measured here)</text>`,
  );
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
