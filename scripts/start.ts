// `npm start`: the engine and the gateway on the bundled model repository,
// supervised. A child that dies is restarted with exponential backoff (reset
// once it has stayed up for a while). SIGTERM/SIGINT go to the gateway first
// (it finishes in-flight calls and unregisters its regions from the engine),
// then to the engine; the supervisor exits 0 when both exit cleanly.
//
// Extra flags: START_ENGINE_ARGS and START_GATEWAY_ARGS (space-separated)
// are appended to each child's command line; REDIS_URL reaches the gateway.
// The engine's admin APIs take a key generated per start, which only the
// gateway is given (start-args.ts).
// The engine listens on loopback and takes shm keys under the gateway's
// prefix only, unless those flags say otherwise (start-args.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { childArgv, startArgs } from './start-args.ts';

interface Spec {
  name: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

// The socket path carries the supervisor's pid so two `npm start`s on one host do not collide.
// The local channel's socket (mode 0600, made by the engine) sits beside it.
const args = startArgs(
  process.env,
  path.join(os.tmpdir(), `tritonish-engine-${process.pid}.sock`),
  undefined,
  path.join(os.tmpdir(), `tritonish-engine-${process.pid}-local.sock`),
);
const specs: Spec[] = [
  { name: 'engine', args: args.engine, env: { ...process.env, ...args.engineEnv } },
  { name: 'gateway', args: args.gateway, env: { ...process.env, ...args.gatewayEnv } },
];

// Compiled (dist/scripts/start.js, what `npm start` runs after its build)
// the children run dist/'s JavaScript; under tsx (development) their sources.
const COMPILED = import.meta.url.endsWith('.js');

const MIN_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 10_000;
const STABLE_MS = 30_000;

class Supervised {
  proc: ChildProcess | undefined;
  private backoff = MIN_BACKOFF_MS;
  private startedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  lastExit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private exitWaiters: Array<() => void> = [];

  constructor(private readonly spec: Spec) {}

  start(): void {
    this.startedAt = Date.now();
    // One node process per child, so signals reach it directly.
    // Own process group: a terminal's Ctrl-C reaches only the supervisor, which stops the children in order.
    const p = spawn(process.execPath, childArgv(this.spec.args, COMPILED), { stdio: 'inherit', env: this.spec.env, detached: true });
    this.proc = p;
    p.on('exit', (code, signal) => {
      this.proc = undefined;
      this.lastExit = { code, signal };
      for (const w of this.exitWaiters.splice(0)) w();
      if (shuttingDown) return;
      if (Date.now() - this.startedAt > STABLE_MS) this.backoff = MIN_BACKOFF_MS;
      process.stderr.write(`start: ${this.spec.name} exited (${signal ?? `code ${code}`}); restarting in ${this.backoff} ms\n`);
      this.timer = setTimeout(() => this.start(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
    });
  }

  /** Send `sig` and resolve when the child has exited (or at once if it is not running). */
  stop(sig: NodeJS.Signals): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    if (!this.proc) return Promise.resolve();
    const done = new Promise<void>((r) => this.exitWaiters.push(r));
    this.proc.kill(sig);
    return done;
  }

  get clean(): boolean {
    return !this.lastExit || this.lastExit.code === 0;
  }
}

let shuttingDown = false;
const children = specs.map((s) => new Supervised(s));
for (const c of children) c.start();

async function shutdown(sig: NodeJS.Signals): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  process.stderr.write(`start: ${sig}: stopping gateway, then engine\n`);
  const [engine, gateway] = children as [Supervised, Supervised];
  await gateway.stop(sig);
  await engine.stop(sig);
  process.exit(children.every((c) => c.clean) ? 0 : 1);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
// If the supervisor exits any other way, do not leave the children running.
process.on('exit', () => {
  for (const c of children) c.proc?.kill('SIGTERM');
});
process.on('SIGINT', () => void shutdown('SIGINT'));
