// Section 6 of the bench report: the engine's CPU per inference by path, the
// issue's targets judged on it with the matching Node floor beside each, and
// the floors themselves (the same clients and bodies against a Node server
// that does nothing, cpu-floors.ts). Pure functions of the collected rows.
import type { Ratio } from './report.ts';
import { f1, f3, notMeasured, table } from './report-table.ts';

/** CPU per request of one server on one path (phase-cpu.ts, cpu-floors.ts), or why it was not measured. */
export interface CpuRow {
  id: string;
  label: string;
  /** Requests counted: by the engine's statistics (engine rows), by the client (floors). */
  inferences?: number;
  throughput?: number;
  /** Server process CPU (all threads) per counted request, ms. */
  cpuMs?: number;
  /** Of which its main thread (gRPC/HTTP, scheduling). */
  mainMs?: number;
  failed?: number;
  skipped?: string;
}

/** A call through a front process (the gateway, or a floor gateway) to the engine, from wrk (cpu-gateway.ts). */
export interface GatewayCpuRow {
  id: string;
  label: string;
  calls?: number;
  failed?: number;
  throughput?: number;
  /** CPU per call of the front process (all threads), ms. */
  frontMs?: number;
  /** CPU per call of the engine behind it, ms. */
  engineMs?: number;
  skipped?: string;
}

/** A CPU target, and the Node floors of its engine row, formatted. */
export interface CpuTarget extends Ratio {
  floors?: string;
}

/** Floor-server modes (the last part of a floor's id) as the report names them. */
export const FLOOR_NAME = { grpcjs: 'grpc-js', h2: 'node:http2', h2own: 'own HTTP/2', http1: 'node:http' } as const;
const MODES = Object.keys(FLOOR_NAME) as Array<keyof typeof FLOOR_NAME>;
/** Order of the floors table: bodies as the engine rows. */
const BODIES = ['enc', 'rec', 'big'];

/** The engine row a floor is measured beside: floor-<key>-<proto>-<mode> -> cpu-<key>-<proto>. */
const engineIdOf = (floorId: string) => `cpu-${floorId.split('-').slice(1, 3).join('-')}`;

/**
 * "grpc-js floor 0.100 ms (54%), node:http2 floor 0.062 ms (33%)" for `engineId`'s floors, % of the engine's figure;
 * floors that were not measured are grouped by why ("grpc-js and node:http2 floors not measured: h2load not installed ...").
 */
function floorCell(floors: CpuRow[], engineId: string, engineMs: number | undefined, copyMs?: number): string {
  const base = engineId === 'cpu-big-grpcjs' ? 'cpu-big-grpc' : engineId; // floors of that body are measured with h2load only
  const measured: string[] = [];
  const missing = new Map<string, string[]>();
  for (const m of MODES) {
    const f = floors.find((r) => r.id === `floor-${base.slice(4)}-${m}`);
    if (!f) continue;
    if (f.cpuMs === undefined) {
      const why = f.skipped ?? 'not run';
      missing.set(why, [...(missing.get(why) ?? []), FLOOR_NAME[m]]);
      continue;
    }
    const pct = engineMs
      ? ` (${((100 * f.cpuMs) / engineMs).toFixed(0)}% of the engine's${copyMs ? `; ${f1(f.cpuMs / copyMs)}× the copy` : ''})`
      : '';
    measured.push(`${FLOOR_NAME[m]} floor ${f3(f.cpuMs)} ms${pct}`);
  }
  // Every engine id given here has floors; none found means the floors phase never ran.
  if (!measured.length && !missing.size) return 'not measured: floors not run';
  const parts = measured.length ? [measured.join(', ') + (base !== engineId ? ' (h2load client)' : '')] : [];
  for (const [why, names] of missing) parts.push(`${names.join(' and ')} floor${names.length > 1 ? 's' : ''} not measured: ${why}`);
  return parts.join('; ');
}

/** The CPU-per-inference targets of issue #14, judged on the rows of this run, each with its floors; every target has a row, measured or not. */
export function cpuTargets(rows: CpuRow[], floors: CpuRow[], copyMs: number | undefined): CpuTarget[] {
  const ms = (id: string) => rows.find((r) => r.id === id)?.cpuMs;
  /** Why rows `ids` have no figure, by reason ("cpu-enc-grpc and cpu-enc-shm: h2load not installed ..."; ratios.ts words it alike). */
  const why = (ids: string[]) => {
    const by = new Map<string, string[]>();
    for (const id of ids.filter((i) => ms(i) === undefined)) {
      const reason = rows.find((r) => r.id === id)?.skipped ?? 'not run';
      by.set(reason, [...(by.get(reason) ?? []), id]);
    }
    return [...by].map(([reason, of]) => `${of.join(' and ')}: ${reason}`).join('; ');
  };
  const withFloors = (r: Ratio, id: string, copy?: number): CpuTarget => ({ ...r, floors: floorCell(floors, id, ms(id), copy) });
  const skipped = (name: string, target: string | undefined, ids: string[]): Ratio => ({
    name,
    measured: '',
    value: undefined,
    target,
    skipped: why(ids) || 'the 10 MiB copy: not run',
  });
  const ratio = (name: string, a: string, b: string, max: number): CpuTarget => {
    const [x, y] = [ms(a), ms(b)];
    if (x === undefined || y === undefined) return withFloors(skipped(name, `≤ ${max}×`, [a, b]), a);
    return withFloors({ name, measured: `${f3(x)} vs ${f3(y)} ms`, value: x / y, target: `≤ ${max}×`, met: x / y <= max }, a);
  };
  const abs = (name: string, id: string, max: number): CpuTarget => {
    const x = ms(id);
    if (x === undefined) return withFloors(skipped(name, `≤ ${max} ms`, [id]), id);
    return withFloors({ name, measured: `${f3(x)} ms`, value: x, target: `≤ ${max} ms`, met: x <= max }, id);
  };
  /** Row `id` against one 10 MiB copy; `target` absent for a path the issue sets none for. */
  const vsCopy = (name: string, id: string, target?: string): CpuTarget => {
    const x = ms(id);
    if (x === undefined || copyMs === undefined) return withFloors(skipped(name, target, [id]), id);
    return withFloors(
      { name, measured: `${f3(x)} vs ${f3(copyMs)} ms`, value: x / copyMs, target, met: target ? x / copyMs < 3 : undefined },
      id,
      copyMs,
    );
  };
  const big = ms('cpu-big-grpc');
  const bigShm = ms('cpu-big-shm');
  return [
    ratio('encoder: inline gRPC vs inputs in shm', 'cpu-enc-grpc', 'cpu-enc-shm', 1.25),
    ratio('encoder: inline HTTP binary vs inputs in shm', 'cpu-enc-http', 'cpu-enc-shm', 1.25),
    big === undefined || copyMs === undefined
      ? withFloors(skipped('10 MiB inline gRPC vs one 10 MiB copy', '< 3×', ['cpu-big-grpc']), 'cpu-big-grpc')
      : withFloors(
          {
            name: '10 MiB inline gRPC vs one 10 MiB copy',
            measured: `${f3(big)} vs ${f3(copyMs)} ms${bigShm === undefined ? '' : `; the same from shm ${f3(bigShm)} ms, so receiving inline adds ${f3(big - bigShm)} ms = ${f1((big - bigShm) / copyMs)}× the copy`}`,
            value: big / copyMs,
            target: '< 3×',
            met: big / copyMs < 3,
          },
          'cpu-big-grpc',
          copyMs,
        ),
    vsCopy('10 MiB inline gRPC from grpc-js vs one 10 MiB copy', 'cpu-big-grpcjs', '< 3×'),
    vsCopy('10 MiB inline HTTP vs one 10 MiB copy (no target; for comparison)', 'cpu-big-http'),
    abs('tiny model over gRPC (ms per inference)', 'cpu-rec-grpc', 0.12),
    abs('tiny model over HTTP (ms per inference)', 'cpu-rec-http', 0.1),
  ];
}

/** The gateway's small call from wrk against the engine's direct HTTP row, with floor gateways beside it. */
function gatewaySection(rows: CpuRow[], gw: GatewayCpuRow[]): string[] {
  const direct = rows.find((r) => r.id === 'cpu-rec-http');
  const directWhy = `cpu-rec-http: ${direct?.skipped ?? 'not run'}`;
  const vs = (r: GatewayCpuRow) =>
    r.throughput && direct?.throughput ? `${f3(r.throughput / direct.throughput)}×` : notMeasured(directWhy, 1)[0]!;
  const out = ['', '### Gateway small call from a C client', ''];
  out.push(
    "wrk, 16 connections, `POST /fn/product_recommender` (64 floats in as JSON, 100 out); each process's CPU (all threads) per call the client counted as 2xx. " +
      'The floor gateways (`test/bench/floor-gateway.ts`) do the least a Node gateway can: read the body, make one ModelInfer call with a prebuilt request to the same engine over the same Unix socket, answer the reply bytes. ' +
      `The direct row is the engine's own HTTP row above (binary extension, wrk, 16 connections): ${direct?.throughput ? `${f1(direct.throughput)} inferences/s at ${f3(direct.cpuMs)} ms of engine CPU` : notMeasured(directWhy, 1)[0]}.`,
    '',
  );
  out.push(
    table(
      [
        'path',
        'front process CPU ms / call',
        'engine CPU ms / call',
        'calls/s',
        'vs the direct engine HTTP row (target ≥ 0.8× for the gateway)',
      ],
      gw.map((r) =>
        r.skipped ? [r.label, ...notMeasured(r.skipped, 4)] : [r.label, f3(r.frontMs), f3(r.engineMs), f1(r.throughput), vs(r)],
      ),
    ),
  );
  return out;
}

function floorsTable(rows: CpuRow[], floors: CpuRow[]): string {
  const rank = (r: CpuRow) => {
    const [, key, , mode] = r.id.split('-');
    return BODIES.indexOf(key!) * 10 + MODES.indexOf(mode as keyof typeof FLOOR_NAME);
  };
  return table(
    [
      'floor: server, body, client',
      'CPU ms / request (all threads)',
      'of which main thread',
      'requests/s',
      'requests',
      'engine on the same path, ms',
      'floor / engine',
    ],
    [...floors]
      .sort((a, b) => rank(a) - rank(b))
      .map((r) => {
        if (r.skipped) return [r.label, ...notMeasured(r.skipped, 6)];
        const engine = rows.find((x) => x.id === engineIdOf(r.id));
        const e = engine?.cpuMs;
        const vsEngine = e
          ? [f3(e), `${((100 * r.cpuMs!) / e).toFixed(0)}%`]
          : notMeasured(`${engineIdOf(r.id)}: ${engine?.skipped ?? 'not run'}`, 2);
        return [
          r.label,
          f3(r.cpuMs),
          f3(r.mainMs),
          f1(r.throughput),
          `${r.inferences}${r.failed ? ` (${r.failed} failed)` : ''}`,
          ...vsEngine,
        ];
      }),
  );
}

/** Section 6: the engine rows, the targets with their floors, then the floors table. */
export function renderCpu(rows: CpuRow[], floors: CpuRow[], copyMs: number | undefined, gateway: GatewayCpuRow[] = []): string[] {
  const out = ['## 6. Engine CPU per inference (C load generators)', ''];
  out.push(
    'Engine process utime+stime (all threads) over the row, divided by the inferences its statistics counted as successful; load from `h2load` (gRPC) and `wrk` (HTTP), 16 connections unless said otherwise. Robust to other load on the host, unlike throughput.',
    '',
  );
  out.push(
    table(
      ['path', 'engine CPU ms / inference', 'of which main thread', 'inferences/s', 'inferences'],
      rows.map((r) =>
        r.skipped
          ? [r.label, ...notMeasured(r.skipped, 4)]
          : [r.label, f3(r.cpuMs), f3(r.mainMs), f1(r.throughput), `${r.inferences}${r.failed ? ` (${r.failed} failed)` : ''}`],
      ),
    ),
    '',
  );
  out.push(
    table(
      ['target', 'measured', 'value', 'target', 'met?', 'Node floor, same client and body (see below)'],
      cpuTargets(rows, floors, copyMs).map((r) =>
        r.skipped
          ? [r.name, ...notMeasured(r.skipped, 2), r.target ?? '—', r.target ? notMeasured(r.skipped, 1)[0]! : '—', r.floors ?? '—']
          : [r.name, r.measured, f3(r.value), r.target ?? '—', r.target ? (r.met ? '**met**' : '**not met**') : '—', r.floors ?? '—'],
      ),
    ),
  );
  if (gateway.length) out.push(...gatewaySection(rows, gateway));
  if (!floors.length) return out;
  out.push('', '### Floors: the same clients against a Node server that does nothing', '');
  out.push(
    "`test/bench/floor-server.ts` reads each request body, discards it and answers a fixed small reply: `node:http2` alone answering like a unary gRPC call (with the engine's HTTP/2 frame and window settings), `@grpc/grpc-js`'s server with a pass-through handler (no protobuf), `node:http`. " +
      'Same bodies, clients, connections and windows as the engine rows, in the same run; its process CPU (all threads) over the window divided by the requests the client counted as succeeded (h2load: HTTP 2xx, each gRPC body first checked once for grpc-status 0; wrk: 2xx). ' +
      'The part of an engine figure at or below its floor is what Node spends receiving and answering that request on that protocol, before any engine code. ' +
      'The engine answers unary ModelInfer on node:http2 itself (engine/frontends/grpc/grpc-direct-infer.ts), so node:http2 is the floor of its gRPC rows; the grpc-js floor is what the same call costs when grpc-js serves it (stock grpc-js, which also assembles each large message into a fresh buffer, so on large bodies it can lie above the engine).',
    '',
  );
  out.push(floorsTable(rows, floors));
  return out;
}
