// `npm run gateway -- --port=8080 --engine=127.0.0.1:8001 --functions=functions
//  --redis-url=redis://127.0.0.1:6379 --shm-threshold=65536 --lease-ttl-ms=10000`
// REDIS_URL works too; with no Redis configured, leases live in memory.
// SIGTERM/SIGINT: finish in-flight calls, unregister and unlink every region,
// release leases, exit 0.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startGateway, type GatewayOptions } from './server.ts';
import { gatewayLog as log } from '../common/logger.ts';
import { GATEWAY_TRANSPORT_FLAGS, gatewayTransportFrom } from './core/transport-options.ts';

const USAGE = `usage: gateway [--port=8080] [--host=0.0.0.0] [--engine=127.0.0.1:8001] [--engine-local-socket=PATH] [--engine-http=127.0.0.1:8000] [--functions=functions]
  [--redis-url=URL] [--shm-threshold=65536] [--max-inline-bytes=N] [--lease-ttl-ms=10000] [--shm=true|false]
  [--arena-regions=2] [--arena-region-bytes=33554432] [--prefix=tgw] [--lease-namespace=tgw:<host>] [--drain-ms=10000]
  [--jobs-concurrency=4] [--job-claim-idle-ms=30000] [--job-journal-max=10000] [--redis-namespace=tgw] [--console=true|false]
  [--presence-ttl-ms=3*lease-ttl] [--header-timeout-ms=15000] [--body-timeout-ms=120000] [--idle-timeout-ms=5000]
  [--direct-route=true|false] [--http1-front=true|false] [--engine-grpc-direct=true|false]
  [--max-calls-per-connection=8] [--max-queued-per-connection=4096] [--max-calls-in-flight=1024]`;

/** Parse `--name=value` flags (then the transport's environment variables) into GatewayOptions; throws naming a bad flag. */
export function parseArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): GatewayOptions {
  const o: GatewayOptions = {};
  const transportFlags: Record<string, string> = {};
  const transportNames = new Set<string>(Object.values(GATEWAY_TRANSPORT_FLAGS));
  const num = (k: string, v: string) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${k} needs a non-negative number, got '${v}'`);
    return n;
  };
  for (const arg of argv) {
    const m = /^--([a-z0-9-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unexpected argument '${arg}'`);
    const [, k, v = 'true'] = m;
    if (transportNames.has(k!)) {
      transportFlags[k!] = v;
      continue;
    }
    switch (k) {
      case 'port':
        o.port = num(k!, v);
        break;
      case 'host':
        o.host = v;
        break;
      case 'engine':
        o.engine = v;
        break;
      case 'functions':
        o.functions = v;
        break;
      case 'redis-url':
        o.redisUrl = v;
        break;
      case 'shm-threshold':
        o.shmThreshold = num(k!, v);
        break;
      case 'max-inline-bytes':
        o.maxInlineBytes = num(k!, v);
        break;
      case 'lease-ttl-ms':
        o.leaseTtlMs = num(k!, v);
        break;
      case 'shm':
        o.shm = v !== 'false';
        break;
      case 'arena-regions':
        o.arenaRegions = num(k!, v);
        break;
      case 'arena-region-bytes':
        o.arenaRegionBytes = num(k!, v);
        break;
      case 'prefix':
        o.prefix = v;
        break;
      case 'lease-namespace':
        o.leaseNamespace = v;
        break;
      case 'drain-ms':
        o.drainMs = num(k!, v);
        break;
      case 'jobs-concurrency':
        o.jobsConcurrency = num(k!, v);
        break;
      case 'job-claim-idle-ms':
        o.jobClaimIdleMs = num(k!, v);
        break;
      case 'job-journal-max':
        o.jobJournalMax = num(k!, v);
        break;
      case 'redis-namespace':
        o.redisNamespace = v;
        break;
      case 'console':
        o.console = v !== 'false';
        break;
      case 'presence-ttl-ms':
        o.presenceTtlMs = num(k!, v);
        break;
      case 'header-timeout-ms':
        o.timeouts = { ...o.timeouts, headersMs: num(k!, v) };
        break;
      case 'body-timeout-ms':
        o.timeouts = { ...o.timeouts, bodyMs: num(k!, v) };
        break;
      case 'idle-timeout-ms':
        o.timeouts = { ...o.timeouts, idleMs: num(k!, v) };
        break;
      case 'max-calls-per-connection':
        o.admission = { ...o.admission, perConnection: Math.max(1, num(k!, v)) };
        break;
      case 'max-queued-per-connection':
        o.admission = { ...o.admission, perConnectionQueue: num(k!, v) };
        break;
      case 'max-calls-in-flight':
        o.admission = { ...o.admission, total: Math.max(1, num(k!, v)) };
        break;
      case 'help':
        throw new Error(USAGE);
      default:
        throw new Error(`unknown flag --${k}\n${USAGE}`);
    }
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
  if (pending) return shutdown(pending);
  if (process.send) process.send({ ready: true, port: gw.port, ownerId: gw.ownerId });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((e) => {
    log.error('gateway failed to start', e);
    process.exit(1);
  });
}
