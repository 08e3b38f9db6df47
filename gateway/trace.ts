// Named tracers and log lines for the gateway (after grpc-js src/logging.ts).
// GATEWAY_TRACE=leases,staging (or "all") turns tracers on by name; log lines
// carry the request id when one is given. GATEWAY_QUIET=1 silences info logs.
const enabled = new Set(
  (process.env.GATEWAY_TRACE ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
);

export interface Tracer {
  (msg: string, requestId?: string): void;
  readonly enabled: boolean;
}

/** A tracer for one module; lines read `TIME TRACE name [request] msg`. */
export function tracer(name: string): Tracer {
  const on = () => enabled.has('all') || enabled.has(name);
  const fn = ((msg: string, requestId?: string) => {
    if (!on()) return;
    const rid = requestId ? ` [${requestId}]` : '';
    process.stderr.write(`${new Date().toISOString()} TRACE ${name}${rid} ${msg}\n`);
  }) as Tracer;
  Object.defineProperty(fn, 'enabled', { get: on });
  return fn;
}

let quiet = process.env.GATEWAY_QUIET !== undefined ? process.env.GATEWAY_QUIET === '1' : process.env.ENGINE_QUIET === '1';
/** Silence info/warn lines (tests). */
export function setQuiet(q: boolean): void {
  quiet = q;
}

/** Info/warn/error lines: `I|W|E<time> gateway: msg`. */
export const log = {
  info: (msg: string) => {
    if (!quiet) process.stderr.write(`I${new Date().toISOString()} gateway: ${msg}\n`);
  },
  warn: (msg: string) => {
    if (!quiet) process.stderr.write(`W${new Date().toISOString()} gateway: ${msg}\n`);
  },
  error: (msg: string, detail?: unknown) => {
    const d = detail instanceof Error ? (detail.stack ?? detail.message) : detail === undefined ? '' : String(detail);
    process.stderr.write(`E${new Date().toISOString()} gateway: ${msg}${d ? ` (${d})` : ''}\n`);
  },
};
