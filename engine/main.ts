// `npm run engine -- --model-repository=DIR ...`: the engine process.
// SIGTERM/SIGINT: stop accepting, finish in-flight requests, unload, exit 0.
import { parseEngineArgs } from './server/cli-options.ts';
import { startEngine } from './server/server.ts';
import { log, setLogVerbose } from '../common/logger.ts';
import { startAllocatorTrim } from '../native/allocator-trim.ts';
import { StatusError, type StatusCode } from './api/status.ts';
import { RESTRICTED_ENV } from './frontends/restricted-api.ts';

/** Triton's TRITONSERVER_ErrorCodeString: INTERNAL -> "Internal". */
const tritonCodeName = (c: StatusCode) => (c === 'INVALID_ARG' ? 'Invalid argument' : c[0] + c.slice(1).toLowerCase().replace(/_/g, ' '));

async function main(): Promise<void> {
  let opts;
  try {
    opts = parseEngineArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  // The restricted-API keys stay in this process: Python stubs and other children do not inherit them.
  // TRITONISH_ENGINE_ADMIN_KEY is the Helm chart's source for them.
  for (const v of [...Object.values(RESTRICTED_ENV), 'TRITONISH_ENGINE_ADMIN_KEY']) delete process.env[v];
  setLogVerbose(opts.logVerbose);
  if (opts.backendDirectory)
    log.info(`--backend-directory=${opts.backendDirectory} accepted and ignored: this engine's backends are built in`);
  // Signals are taken from the first moment: one during start-up (a pod
  // deleted while its models load) stops the engine as soon as loading ends,
  // so Python stubs and worker threads are shut down, not orphaned. Loading
  // that outlasts --exit-timeout-secs after the signal exits 1.
  let stopRequested: string | undefined;
  let running: Awaited<ReturnType<typeof startEngine>> | undefined;
  let stopping = false;
  const exitTimeoutSecs = opts.exitTimeoutSecs ?? 30;
  const shutdown = (sig: string) => {
    if (stopping) return;
    if (!running) {
      if (stopRequested) return;
      stopRequested = sig;
      log.info(`${sig} during start-up: stopping once model loading ends (at most ${exitTimeoutSecs} s)`);
      setTimeout(() => {
        log.error(`${sig}: start-up did not end within --exit-timeout-secs=${exitTimeoutSecs}; exiting`);
        process.exit(1);
      }, exitTimeoutSecs * 1000).unref();
      return;
    }
    stopping = true;
    log.info(`${sig}: stopping; finishing in-flight requests`);
    running.stop().then(
      () => {
        log.info('engine stopped');
        process.exit(0);
      },
      (err) => {
        log.error('engine stop failed', err);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  running = await startEngine(opts);
  startAllocatorTrim(opts.allocatorTrimSecs * 1000);
  const index = running.server.repositoryIndex(false);
  for (const m of index) log.info(`model ${m.name}${m.version ? `:${m.version}` : ''} ${m.state}${m.reason ? ` (${m.reason})` : ''}`);
  // Ready is said only once SIGTERM/SIGINT are handled (they are from the start): a supervisor that stops the engine on this line gets a drain, not a kill.
  log.info(`engine ready: ${index.filter((m) => m.state === 'READY').length}/${index.length} models READY`);
  if (stopRequested) shutdown(stopRequested);
}

main().catch((err) => {
  // Triton's words for a failed start ("error: creating server: Internal - ..."); the stack only for the unexpected.
  if (err instanceof StatusError) log.error(`error: creating server: ${tritonCodeName(err.code)} - ${err.message}`);
  else log.error(`engine failed to start: ${(err as Error).message}`, err);
  process.exit(1);
});
