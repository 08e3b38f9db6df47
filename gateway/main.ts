// `npm run gateway -- --port=8080 --engine=127.0.0.1:8001 --functions=functions
//  --redis-url=redis://127.0.0.1:6379 --shm-threshold=65536 --lease-ttl-ms=10000`
// REDIS_URL works too; with no Redis configured, leases live in memory.
// SIGTERM/SIGINT: finish in-flight calls, unregister and unlink every region,
// release leases, exit 0.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAllocatorTrim } from '../native/allocator-trim.ts';
import { startGateway } from './server.ts';
import type { GatewayOptions } from './options.ts';
import { gatewayLog as log } from '../common/logger.ts';
import { GATEWAY_TRANSPORT_FLAGS, gatewayTransportFrom } from './core/transport-options.ts';

export const USAGE = `usage: gateway [--port=8080] [--host=0.0.0.0] [--engine=127.0.0.1:8001] [--engine-local-socket=PATH] [--engine-http=127.0.0.1:8000] [--functions=functions]
  [--redis-url=URL] [--shm-threshold=65536] [--max-inline-bytes=N] [--lease-ttl-ms=10000] [--shm=true|false]
  [--arena-regions=2] [--arena-region-bytes=33554432] [--prefix=tgw] [--lease-namespace=tgw:<host>] [--drain-ms=10000]
  [--jobs-concurrency=4] [--job-claim-idle-ms=30000] [--job-journal-max=10000]
  [--job-records-max=10000] [--job-records-max-bytes=134217728] [--allocator-trim-secs=60] [--redis-namespace=tgw] [--console=true|false]
  [--presence-ttl-ms=3*lease-ttl] [--header-timeout-ms=15000] [--body-timeout-ms=120000] [--idle-timeout-ms=5000]
  [--direct-route=true|false] [--http1-front=true|false] [--engine-grpc-direct=true|false]
  [--max-calls-per-connection=8] [--max-queued-per-connection=4096] [--max-calls-in-flight=1024]`;

/** Applies one flag's value to the options being built (`flag` names it in errors). */
type FlagSetter = (o: GatewayOptions, value: string, flag: string) => void;

/** A flag's value as a non-negative number. */
const count = (flag: string, v: string): number => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${flag} needs a non-negative number, got '${v}'`);
  return n;
};

/** Every gateway flag but --help and the transport's (core/transport-options.ts), with what it sets; docs/reference.md names each. */
export const GATEWAY_FLAGS: Readonly<Record<string, FlagSetter>> = {
  port: (o, v, f) => (o.port = count(f, v)),
  host: (o, v) => (o.host = v),
  engine: (o, v) => (o.engine = v),
  functions: (o, v) => (o.functions = v),
  'redis-url': (o, v) => (o.redisUrl = v),
  'shm-threshold': (o, v, f) => (o.shmThreshold = count(f, v)),
  'max-inline-bytes': (o, v, f) => (o.maxInlineBytes = count(f, v)),
  'lease-ttl-ms': (o, v, f) => (o.leaseTtlMs = count(f, v)),
  shm: (o, v) => (o.shm = v !== 'false'),
  'arena-regions': (o, v, f) => (o.arenaRegions = count(f, v)),
  'arena-region-bytes': (o, v, f) => (o.arenaRegionBytes = count(f, v)),
  prefix: (o, v) => (o.prefix = v),
  'lease-namespace': (o, v) => (o.leaseNamespace = v),
  'drain-ms': (o, v, f) => (o.drainMs = count(f, v)),
  'jobs-concurrency': (o, v, f) => (o.jobsConcurrency = count(f, v)),
  'job-claim-idle-ms': (o, v, f) => (o.jobClaimIdleMs = count(f, v)),
  'job-journal-max': (o, v, f) => (o.jobJournalMax = count(f, v)),
  'job-records-max': (o, v, f) => (o.jobRecordsMax = Math.max(1, count(f, v))),
  'job-records-max-bytes': (o, v, f) => (o.jobRecordsMaxBytes = Math.max(1, count(f, v))),
  'allocator-trim-secs': (o, v, f) => (o.allocatorTrimSecs = count(f, v)),
  'redis-namespace': (o, v) => (o.redisNamespace = v),
  console: (o, v) => (o.console = v !== 'false'),
  'presence-ttl-ms': (o, v, f) => (o.presenceTtlMs = count(f, v)),
  'header-timeout-ms': (o, v, f) => (o.timeouts = { ...o.timeouts, headersMs: count(f, v) }),
  'body-timeout-ms': (o, v, f) => (o.timeouts = { ...o.timeouts, bodyMs: count(f, v) }),
  'idle-timeout-ms': (o, v, f) => (o.timeouts = { ...o.timeouts, idleMs: count(f, v) }),
  'max-calls-per-connection': (o, v, f) => (o.admission = { ...o.admission, perConnection: Math.max(1, count(f, v)) }),
  'max-queued-per-connection': (o, v, f) => (o.admission = { ...o.admission, perConnectionQueue: count(f, v) }),
  'max-calls-in-flight': (o, v, f) => (o.admission = { ...o.admission, total: Math.max(1, count(f, v)) }),
};

/** Parse `--name=value` flags (then the transport's environment variables) into GatewayOptions; throws naming a bad flag. */
export function parseArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): GatewayOptions {
  const o: GatewayOptions = {};
  const transportFlags: Record<string, string> = {};
  const transportNames = new Set<string>(Object.values(GATEWAY_TRANSPORT_FLAGS));
  for (const arg of argv) {
    const m = /^--([a-z0-9-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unexpected argument '${arg}'`);
    const [k, v] = [m[1]!, m[2] ?? 'true'];
    if (transportNames.has(k)) transportFlags[k] = v;
    else if (k === 'help') throw new Error(USAGE);
    else if (Object.hasOwn(GATEWAY_FLAGS, k)) GATEWAY_FLAGS[k]!(o, v, k);
    else throw new Error(`unknown flag --${k}\n${USAGE}`);
  }
  o.transport = gatewayTransportFrom(transportFlags, env);
  return o;
}

async function main(): Promise<void> {
  let opts: GatewayOptions;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    process.exit(2);
  }
  // Signals are taken from the first moment: one during start-up stops the
  // gateway (regions unregistered and unlinked) as soon as start-up ends.
  let gw: Awaited<ReturnType<typeof startGateway>> | undefined;
  let pending: string | undefined;
  const shutdown = (sig: string) => {
    log.info(`${sig} received${gw ? '' : ' during start-up; stopping once it ends'}`);
    if (!gw) {
      pending ??= sig;
      return;
    }
    gw.stop().then(
      () => process.exit(0),
      (e) => {
        log.error('shutdown failed', e);
        process.exit(1);
      },
    );
  };
  // gw.stop() is idempotent: a second signal (terminal plus supervisor) joins the first shutdown.
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  gw = await startGateway(opts);
  startAllocatorTrim((opts.allocatorTrimSecs ?? 60) * 1000);
  if (pending) return shutdown(pending);
  if (process.send) process.send({ ready: true, port: gw.port, ownerId: gw.ownerId });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((e) => {
    log.error('gateway failed to start', e);
    process.exit(1);
  });
}
