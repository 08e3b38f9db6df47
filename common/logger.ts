// The one logger of both processes (engine and gateway). Named tracers (after
// grpc-js src/logging.ts): ENGINE_TRACE or GATEWAY_TRACE=batcher,leases (or
// "all") turns tracers on by name; --log-verbose>0 turns all on. Log lines are
// Triton-style `I|W|E<time> msg`; the gateway's carry `gateway: ` (gatewayLog).
// ENGINE_QUIET=1 (GATEWAY_QUIET, when set, wins) silences info/warn lines.
import fs from 'node:fs';
import { inspect } from 'node:util';

const enabled = new Set(
  [process.env.ENGINE_TRACE, process.env.GATEWAY_TRACE]
    .join(',')
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
    write(`${new Date().toISOString()} TRACE ${name}${rid} ${msg}\n`);
  }) as Tracer;
  Object.defineProperty(fn, 'enabled', { get: () => verbose > 0 || enabled.has('all') || enabled.has(name) });
  return fn;
}

/** The open log file (Triton's --log-file / log_file), or undefined for stderr. */
let logFile: { path: string; fd: number } | undefined;

/** Every log line leaves here: to the log file when one is set, else stderr. */
function write(line: string): void {
  if (!logFile) {
    process.stderr.write(line);
    return;
  }
  try {
    fs.writeSync(logFile.fd, line);
  } catch {
    process.stderr.write(line);
  }
}

/**
 * Send the log to `file` (appended; created 0644) or back to stderr
 * (undefined). `flags` adds open flags (O_NOFOLLOW for a file a client
 * named). Throws when the file cannot be opened; the old sink stays then.
 */
export function setLogFile(file: string | undefined, flags = 0): void {
  const next = file
    ? { path: file, fd: fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_APPEND | flags, 0o644) }
    : undefined;
  const prev = logFile;
  logFile = next;
  if (prev) fs.closeSync(prev.fd);
}
/** The current log file ('' for stderr). */
export function currentLogFile(): string {
  return logFile?.path ?? '';
}

/** Which levels are written (Triton's log_info / log_warning / log_error). */
const levels = { info: true, warn: true, error: true };
export function setLogLevels(l: Partial<typeof levels>): void {
  Object.assign(levels, l);
}

let quiet = (process.env.GATEWAY_QUIET ?? process.env.ENGINE_QUIET) === '1';
/** Silence info and warning lines of both processes (tests). */
export function setQuiet(q: boolean): void {
  quiet = q;
}

export interface Log {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string, detail?: unknown): void;
}

/** Info/warn/error lines, Triton-style prefixes; `component` (e.g. 'gateway') leads each message. */
function componentLog(component: string): Log {
  const who = component ? `${component}: ` : '';
  return {
    info: (msg) => {
      if (!quiet && levels.info) write(`I${stamp()} ${who}${msg}\n`);
    },
    warn: (msg) => {
      if (!quiet && levels.warn) write(`W${stamp()} ${who}${msg}\n`);
    },
    error: (msg, detail) => {
      if (levels.error) write(`E${stamp()} ${who}${msg}${detail ? ` (${fmt(detail)})` : ''}\n`);
    },
  };
}

/** The engine's log lines. */
export const log = componentLog('');
/** The gateway's log lines (`gateway: ` after the time). */
export const gatewayLog = componentLog('gateway');
function stamp(): string {
  return new Date().toISOString();
}
function fmt(d: unknown): string {
  if (d instanceof Error) return d.stack ?? d.message;
  return typeof d === 'object' ? inspect(d, { depth: 4, breakLength: Infinity }) : String(d);
}
