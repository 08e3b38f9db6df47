// Named tracers (after grpc-js src/logging.ts). ENGINE_TRACE=batcher,ensemble
// (or "all") turns tracers on by name; --log-verbose>0 turns all on.
import { inspect } from 'node:util';

const enabled = new Set(
  (process.env.ENGINE_TRACE ?? process.env.GATEWAY_TRACE ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
);
let verbose = 0;

/** Set the verbosity (Triton's --log-verbose). */
export function setLogVerbose(level: number): void {
  verbose = level;
}
export function logVerbose(): number {
  return verbose;
}

export interface Tracer {
  (msg: string, requestId?: string): void;
  readonly enabled: boolean;
}

/** A tracer for one module; lines read `TIME TRACE name [request] msg`. */
export function tracer(name: string): Tracer {
  const fn = ((msg: string, requestId?: string) => {
    if (!(verbose > 0 || enabled.has('all') || enabled.has(name))) return;
    const rid = requestId ? ` [${requestId}]` : '';
    process.stderr.write(`${new Date().toISOString()} TRACE ${name}${rid} ${msg}\n`);
  }) as Tracer;
  Object.defineProperty(fn, 'enabled', { get: () => verbose > 0 || enabled.has('all') || enabled.has(name) });
  return fn;
}

let quiet = process.env.ENGINE_QUIET === '1';
/** Silence info logs (tests). */
export function setQuiet(q: boolean): void {
  quiet = q;
}
/** Info/warn/error log lines, Triton-style prefixes. */
export const log = {
  info: (msg: string) => {
    if (!quiet) process.stderr.write(`I${stamp()} ${msg}\n`);
  },
  warn: (msg: string) => {
    if (!quiet) process.stderr.write(`W${stamp()} ${msg}\n`);
  },
  error: (msg: string, detail?: unknown) => {
    process.stderr.write(`E${stamp()} ${msg}${detail ? ` (${fmt(detail)})` : ''}\n`);
  },
};
function stamp(): string {
  return new Date().toISOString();
}
function fmt(d: unknown): string {
  if (d instanceof Error) return d.stack ?? d.message;
  return typeof d === 'object' ? inspect(d, { depth: 4, breakLength: Infinity }) : String(d);
}
