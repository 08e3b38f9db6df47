// SIGTERM to `npm start`'s own PID (issue 39): what a process manager
// (systemd, supervisord, a container runtime without an init) signals. npm
// forwards the signal to its script's process; the script must `exec` the
// supervisor, or the signal stops at the shell and the supervisor, engine
// and gateway keep running with their ports held. Here the real npm runs the
// real script on free ports; one SIGTERM to npm's PID must leave no
// supervisor, engine or gateway and every port free, within the gateway's
// drain time (scaled by the host's load), and npm must exit 0.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitFor } from './L0_gateway-support.ts';

const ROOT = path.join(import.meta.dirname, '../..');
const DRAIN_MS = 5000;
let npm: ChildProcess;
let out = '';
const ports: Record<string, number> = {};

/** Every descendant of `pid` (from /proc), with its command line. */
function descendants(pid: number): Array<{ pid: number; cmd: string }> {
  const out: Array<{ pid: number; cmd: string }> = [];
  const walk = (p: number) => {
    let kids: number[] = [];
    try {
      kids = fs
        .readdirSync(`/proc/${p}/task`)
        .flatMap((t) => fs.readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
    } catch {
      return;
    }
    for (const k of kids) {
      try {
        out.push({ pid: k, cmd: fs.readFileSync(`/proc/${k}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() });
      } catch {
        continue;
      }
      walk(k);
    }
  };
  walk(pid);
  return out;
}

const alive = (pid: number): boolean => {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
};

const portFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });

let started: Array<{ pid: number; cmd: string }> = [];

beforeAll(async () => {
  for (const k of ['gateway', 'grpc', 'http', 'metrics']) ports[k] = await freePort();
  npm = spawn('npm', ['start'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      REDIS_URL: '',
      ENGINE_QUIET: '0',
      START_ENGINE_ARGS: `--grpc-port=${ports.grpc} --http-port=${ports.http} --metrics-port=${ports.metrics}`,
      START_GATEWAY_ARGS: `--port=${ports.gateway} --host=127.0.0.1 --prefix=tgnpm --drain-ms=${DRAIN_MS}`,
    },
  });
  npm.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  npm.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  await waitFor('gateway ready', async () => (await fetch(`http://127.0.0.1:${ports.gateway}/readyz`)).status === 200, 180_000, 250).catch(
    (e) => {
      throw new Error(`${(e as Error).message}\n${out}`);
    },
  );
  started = descendants(npm.pid!);
}, 240_000);

afterAll(() => {
  // Only after a failure: whatever this test started and is still running.
  for (const p of [...started, { pid: npm?.pid ?? 0, cmd: 'npm' }]) if (p.pid && alive(p.pid)) process.kill(p.pid, 'SIGKILL');
});

describe('npm start and SIGTERM', () => {
  it("the script execs the supervisor: npm's child is the supervisor itself, which runs the engine and the gateway", () => {
    const [child] = descendants(npm.pid!);
    expect(child!.cmd).toMatch(/^\S*node dist\/scripts\/start\.js$/); // not `sh -c "... && node ..."`
    expect(started.map((p) => p.cmd).filter((c) => /dist\/(engine|gateway)\/main\.js/.test(c))).toHaveLength(2);
  });

  it("one SIGTERM to npm's PID stops supervisor, engine and gateway within the drain time, frees every port, npm exits 0", async () => {
    const exit = new Promise<number | null>((r) => npm.once('exit', (code) => r(code)));
    const t0 = Date.now();
    process.kill(npm.pid!, 'SIGTERM');
    const budget = DRAIN_MS * Math.max(1, os.loadavg()[0]! / os.availableParallelism());
    await waitFor('supervisor, engine and gateway gone', () => started.every((p) => !alive(p.pid)), budget, 50).catch((e) => {
      throw new Error(
        `${(e as Error).message}: still running ${started
          .filter((p) => alive(p.pid))
          .map((p) => p.cmd)
          .join('; ')}\n${out}`,
      );
    });
    const seconds = (Date.now() - t0) / 1000;
    expect(await exit).toBe(0);
    for (const [name, port] of Object.entries(ports)) expect(await portFree(port), `${name} port ${port}`).toBe(true);
    expect(seconds * 1000).toBeLessThan(budget);
    expect(out).toMatch(/start: SIGTERM: stopping gateway, then engine/);
  }, 120_000);
});
