// Triton's command-line flags for the engine, parsed into EngineOptions.
// Both `--flag=value` and `--flag value` work.
import { parseArgs } from 'node:util';
import type { EngineOptions } from './server.ts';
import type { ControlMode } from '../repository/model-repository-manager.ts';
import { traceSettingsFromFlags } from '../tracing/trace-manager.ts';
import { parseCacheConfig } from '../sharing/response-cache.ts';
import { parseResourceFlag } from '../sharing/rate-limiter-decision.ts';
import { parseBudget } from '../sharing/eviction-decision.ts';
import { DEFAULT_INSTANCE_LIMITS } from '../repository/instance-limits.ts';
import { DEFAULT_HTTP_TIMEOUTS } from '../frontends/http/http-timeouts.ts';
import os from 'node:os';
import { restrictedOption } from '../frontends/restricted-api.ts';
import { DEFAULT_STREAM_MAX_QUEUED_BYTES } from '../frontends/stream-queue-bound.ts';
import { parseH2Limits } from '../../net/h2/h2-limits.ts';
import { engineTransportFrom } from '../frontends/transport-options.ts';

const rateLimitMode = (v: string | undefined): 'off' | 'execution_count' => {
  if (v === undefined || v === 'off' || v === 'execution_count') return v ?? 'off';
  throw new Error(`--rate-limit: expected off or execution_count, got '${v}'`);
};

export const USAGE = `Usage: npm run engine -- --model-repository=DIR [options]
  --model-repository=DIR        model repository (required; --model-store is the same)
  --grpc-port=8001 --http-port=8000 --metrics-port=8002
  --grpc-unix-socket=PATH       also serve gRPC on this Unix socket (for a colocated gateway)
  --local-socket=PATH           serve unary ModelInfer on this Unix socket without HTTP/2 (ours: the
                                colocated gateway's local channel, docs/engine/local-channel.md; off by default)
  --http-address=0.0.0.0        address all frontends bind
  --allow-grpc=true --allow-http=true --allow-metrics=true
  --model-control-mode=none     none | poll | explicit | on-demand (ours: a request loads its model)
  --load-model=NAME             explicit mode: load at start (repeatable; * = all)
  --repository-poll-secs=15     poll mode interval
  --strict-model-config=false   false: complete missing inputs/outputs from the model file
  --strict-readiness=true       server ready only when every model is ready
  --allow-client-shm=false      accept system shared-memory registrations
  --shm-key-prefix=PREFIX       only shm keys with this prefix may be registered
  --shm-max-regions=N           most system shm regions registered at once (default unlimited)
  --shm-max-bytes=N             most bytes registered in system shm regions at once (default unlimited)
  --backend-config=python,KEY=VALUE  backend setting (repeatable; python: python-executable, execution-env-path,
                                stub-timeout-seconds=30, shm-default-byte-size=1048576; other backends' keys are ignored)
  --backend-directory=DIR       accepted for Triton's scripts and ignored (backends are built in; logged)
  --trace-config=SETTING        Triton's: triton,file=F  level=TIMESTAMPS|TENSORS  rate=N  count=N
                                triton,log-frequency=N  mode=opentelemetry  opentelemetry,url=URL (repeatable)
  --server-name=triton          server metadata name (Triton's clients compare it)
  --cache-config=local,size=N   response cache: in-process LRU of N bytes (repeatable, Triton's syntax)
  --cache-config=redis,host=H,port=P   response cache in Redis (shared by every engine on it);
                                ,ttl_ms=N entry lifetime (default 3600000; 0 = none)
  --model-memory-budget=B       bytes or N% of RAM the loaded models may take (ours)
  --pin-model=NAME              never evict NAME for the budget (repeatable)
  --max-instances-per-model=64  most execution instances one model may ask for at load (ours)
  --max-instances-total=512     most instances of all loaded models together (ours)
  --on-demand-load-timeout-secs=30   how long a request waits for an on-demand load
  --exit-timeout-secs=30        how long an unload or the shutdown waits for in-flight requests; then
                                python stubs still executing are killed and their requests fail
  --adaptive-instances=false    models with parameters max_instance_count grow/shrink with queue time (ours)
  --rate-limit=off             off | execution_count (Triton's rate limiter over instance_group rate_limiter)
  --rate-limit-resource=NAME:COUNT[:DEVICE]   copies of a rate-limiter resource (repeatable)
  --log-verbose=0               >0 turns on every tracer (ENGINE_TRACE=name,... picks some)
  --log-file=PATH               write the log to PATH instead of stderr (Triton's)
  --exit-on-error=true          exit when the model repository cannot be read at start
  --http-restricted-api=API[,API...]:KEY=VALUE    HTTP endpoints of these groups need header KEY: VALUE (repeatable;
                                groups: health metadata inference shared-memory model-config model-repository
                                statistics trace logging); ENGINE_HTTP_RESTRICTED_API holds one more, off the command line
  --grpc-restricted-protocol=API[,API...]:KEY=VALUE   the same for gRPC (metadata triton-grpc-protocol-KEY);
                                ENGINE_GRPC_RESTRICTED_PROTOCOL holds one more
  --trace-dir=DIR               trace_file given over the API must lie under DIR (ours; none: refused, as Triton)
  --log-dir=DIR                 log_file given over the API must lie under DIR (ours; none: refused, as Triton)
  --http-header-timeout-ms=15000 --http-body-timeout-ms=120000 --http-idle-timeout-ms=5000
                                slow clients on the HTTP and metrics ports are dropped (ours)
  --stream-max-queued-bytes=67108864  responses one generate_stream / ModelStreamInfer stream may hold for a
                                client that is not reading; past it the stream's requests are cancelled (ours)
  --grpc-max-response-pool-size=N  ModelStreamInfer responses handed to HTTP/2 and not yet taken, per stream, at
                                most (Triton's; default: no bound); TRITONSERVER_DELAY_GRPC_RESPONSE=MS (Triton's
                                test hook) delays each stream write by MS
  --grpc-h2-limit=NAME=VALUE    a bound of the own HTTP/2 front (repeatable; ours, docs/engine/h2-front.md):
                                max-header-list-bytes=65536 max-header-fields=128 max-continuations=8
                                max-concurrent-streams=1000 reset-burst=1000 resets-per-second=33
                                max-queued-control=1000 max-buffered-bytes=67108864 idle-timeout-ms=300000 (0: none)
                                max-control-without-data=1000 frames-per-turn=64 header-bytes-per-turn=16384
  --grpc-front=default          default | own | grpc-js: which HTTP/2 server answers the gRPC listeners: the
                                own front (default, own) or node:http2 (grpc-js) (ours; ENGINE_GRPC_FRONT;
                                docs/reference.md#transport-options)
  --allocator-trim-secs=60      return the allocator's free memory to the kernel this often (glibc malloc_trim;
                                ours; 0: never; docs/reliability.md#what-grows-in-a-soak-issue-41-2026-12-06)
`;

const bool = (v: string | undefined, dflt: boolean, flag: string): boolean => {
  if (v === undefined) return dflt;
  if (/^(true|1|yes|on)$/i.test(v)) return true;
  if (/^(false|0|no|off)$/i.test(v)) return false;
  throw new Error(`--${flag}: expected true or false, got '${v}'`);
};
const int = (v: string | undefined, dflt: number, flag: string): number => {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new Error(`--${flag}: expected an integer, got '${v}'`);
  return n;
};

const positive = (v: string | undefined, dflt: number, flag: string): number => {
  const n = int(v, dflt, flag);
  if (n <= 0) throw new Error(`--${flag}: expected a positive integer, got '${v}'`);
  return n;
};

const nonNegative = (v: string | undefined, dflt: number, flag: string): number => {
  const n = int(v, dflt, flag);
  if (n < 0) throw new Error(`--${flag}: expected a non-negative integer, got '${v}'`);
  return n;
};

const s = { type: 'string' } as const;

/** Every flag the engine takes (test/unit/cli-options.test.ts checks each is in USAGE and docs/reference.md). */
export const ENGINE_FLAGS = {
  'model-repository': s,
  'model-store': s,
  'grpc-port': s,
  'grpc-unix-socket': s,
  'local-socket': s,
  'http-port': s,
  'metrics-port': s,
  'http-address': s,
  'allow-grpc': s,
  'allow-http': s,
  'allow-metrics': s,
  'model-control-mode': s,
  'load-model': { type: 'string', multiple: true },
  'repository-poll-secs': s,
  'strict-model-config': s,
  'strict-readiness': s,
  'allow-client-shm': s,
  'shm-key-prefix': s,
  'shm-max-regions': s,
  'shm-max-bytes': s,
  'log-verbose': s,
  'backend-config': { type: 'string', multiple: true },
  'server-name': s,
  'trace-config': { type: 'string', multiple: true },
  'cache-config': { type: 'string', multiple: true },
  'rate-limit': s,
  'rate-limit-resource': { type: 'string', multiple: true },
  'model-memory-budget': s,
  'pin-model': { type: 'string', multiple: true },
  'on-demand-load-timeout-secs': s,
  'exit-timeout-secs': s,
  'adaptive-instances': s,
  help: { type: 'boolean' },
  'http-restricted-api': { type: 'string', multiple: true },
  'grpc-restricted-protocol': { type: 'string', multiple: true },
  'trace-dir': s,
  'log-dir': s,
  'log-file': s,
  'exit-on-error': s,
  'http-header-timeout-ms': s,
  'http-body-timeout-ms': s,
  'http-idle-timeout-ms': s,
  'backend-directory': s,
  'stream-max-queued-bytes': s,
  'grpc-h2-limit': { type: 'string', multiple: true },
  'grpc-front': s,
  'grpc-max-response-pool-size': s,
  'max-instances-per-model': s,
  'max-instances-total': s,
  'allocator-trim-secs': s,
} as const;

/** Parse argv (without node and script) into engine options and the log verbosity. */
export function parseEngineArgs(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): EngineOptions & { logVerbose: number; backendDirectory?: string; allocatorTrimSecs: number } {
  const { values } = parseArgs({
    args: argv,
    options: ENGINE_FLAGS,
    strict: true,
    allowPositionals: false,
  });
  if (values.help) throw new Error(USAGE);
  const repo = values['model-repository'] ?? values['model-store'];
  if (!repo) throw new Error(`--model-repository is required\n${USAGE}`);
  const mode = (values['model-control-mode'] ?? 'none') as ControlMode;
  if (!['none', 'poll', 'explicit', 'on-demand'].includes(mode))
    throw new Error(`--model-control-mode: expected none, poll, explicit or on-demand, got '${mode}'`);
  const loadModels = values['load-model'] ?? [];
  if (loadModels.length && mode !== 'explicit' && mode !== 'on-demand') throw new Error('--load-model needs --model-control-mode=explicit');
  return {
    modelRepository: repo,
    host: values['http-address'] ?? '0.0.0.0',
    grpcPort: bool(values['allow-grpc'], true, 'allow-grpc') ? int(values['grpc-port'], 8001, 'grpc-port') : -1,
    httpPort: bool(values['allow-http'], true, 'allow-http') ? int(values['http-port'], 8000, 'http-port') : -1,
    grpcUnixSocket: values['grpc-unix-socket'] || undefined,
    localSocket: values['local-socket'] || undefined,
    metricsPort: bool(values['allow-metrics'], true, 'allow-metrics') ? int(values['metrics-port'], 8002, 'metrics-port') : -1,
    controlMode: mode,
    loadModels,
    repositoryPollSecs: int(values['repository-poll-secs'], 15, 'repository-poll-secs'),
    allocatorTrimSecs: nonNegative(values['allocator-trim-secs'], 60, 'allocator-trim-secs'),
    strictModelConfig: bool(values['strict-model-config'], false, 'strict-model-config'),
    strictReadiness: bool(values['strict-readiness'], true, 'strict-readiness'),
    allowClientShm: bool(values['allow-client-shm'], false, 'allow-client-shm'),
    shmKeyPrefix: values['shm-key-prefix'],
    shmMaxRegions: values['shm-max-regions'] === undefined ? undefined : int(values['shm-max-regions'], 0, 'shm-max-regions'),
    shmMaxBytes: values['shm-max-bytes'] === undefined ? undefined : int(values['shm-max-bytes'], 0, 'shm-max-bytes'),
    cacheConfig: parseCacheConfig(values['cache-config'] ?? []),
    rateLimit: rateLimitMode(values['rate-limit']),
    modelMemoryBudget: values['model-memory-budget'] === undefined ? undefined : parseBudget(values['model-memory-budget'], os.totalmem()),
    pinnedModels: values['pin-model'] ?? [],
    instanceLimits: {
      perModel: positive(values['max-instances-per-model'], DEFAULT_INSTANCE_LIMITS.perModel, 'max-instances-per-model'),
      total: positive(values['max-instances-total'], DEFAULT_INSTANCE_LIMITS.total, 'max-instances-total'),
    },
    adaptiveInstances: bool(values['adaptive-instances'], false, 'adaptive-instances'),
    onDemandTimeoutMs: int(values['on-demand-load-timeout-secs'], 30, 'on-demand-load-timeout-secs') * 1000,
    exitTimeoutSecs: nonNegative(values['exit-timeout-secs'], 30, 'exit-timeout-secs'),
    rateLimitResources: (values['rate-limit-resource'] ?? []).map(parseResourceFlag),
    logVerbose: int(values['log-verbose'], 0, 'log-verbose'),
    // Triton's test scripts pass it; the engine's backends are built in: main.ts says so in the log.
    backendDirectory: values['backend-directory'] || undefined,
    backendConfig: parseBackendConfig(values['backend-config'] ?? []),
    serverName: values['server-name'],
    traceConfig: traceSettingsFromFlags(values['trace-config'] ?? []),
    httpRestricted: restrictedOption(values['http-restricted-api'] ?? [], env, 'http-restricted-api'),
    grpcRestricted: restrictedOption(values['grpc-restricted-protocol'] ?? [], env, 'grpc-restricted-protocol'),
    traceDir: values['trace-dir'] || undefined,
    logDir: values['log-dir'] || undefined,
    logFile: values['log-file'] || undefined,
    exitOnError: bool(values['exit-on-error'], true, 'exit-on-error'),
    httpTimeouts: {
      headersMs: positive(values['http-header-timeout-ms'], DEFAULT_HTTP_TIMEOUTS.headersMs, 'http-header-timeout-ms'),
      bodyMs: positive(values['http-body-timeout-ms'], DEFAULT_HTTP_TIMEOUTS.bodyMs, 'http-body-timeout-ms'),
      idleMs: positive(values['http-idle-timeout-ms'], DEFAULT_HTTP_TIMEOUTS.idleMs, 'http-idle-timeout-ms'),
    },
    streamMaxQueuedBytes: positive(values['stream-max-queued-bytes'], DEFAULT_STREAM_MAX_QUEUED_BYTES, 'stream-max-queued-bytes'),
    grpcH2Limits: parseH2Limits(values['grpc-h2-limit'] ?? []),
    transport: engineTransportFrom(values, env),
    grpcStreamPacing: {
      maxResponsePoolSize:
        values['grpc-max-response-pool-size'] === undefined
          ? undefined
          : positive(values['grpc-max-response-pool-size'], 0, 'grpc-max-response-pool-size'),
      // Triton's test hook, read once at start as Triton does (a count of ms; anything else is none).
      delayMs: Math.max(0, Math.trunc(Number(env.TRITONSERVER_DELAY_GRPC_RESPONSE ?? 0)) || 0),
    },
  };
}

/** Triton's `--backend-config=<backend>,<key>=<value>` flags, grouped by backend. */
export function parseBackendConfig(flags: string[]): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const f of flags) {
    const m = /^([^,=]+),([^=]+)=(.*)$/.exec(f);
    if (!m) throw new Error(`--backend-config: expected <backend>,<key>=<value>, got '${f}'`);
    (out[m[1]!] ??= {})[m[2]!] = m[3]!;
  }
  return out;
}
