// Helpers for the gateway suites: a real redis-server on a free port, free
// ports, polling. Not a test file itself.
import { spawn, type ChildProcess } from 'node:child_process';

import { freePort } from '../fixtures/net.ts';

export { freePort };

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
  everyMs = 50,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A redis-server child on `port` (no persistence); stop() kills it and waits. */
export class TestRedis {
  private proc: ChildProcess | undefined;
  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<TestRedis> {
    const r = new TestRedis(await freePort());
    await r.start();
    return r;
  }

  async start(): Promise<void> {
    const p = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc = p;
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const t = setTimeout(() => reject(new Error(`redis-server did not start: ${out}`)), 10_000);
      p.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('Ready to accept connections')) {
          clearTimeout(t);
          resolve();
        }
      });
      p.on('exit', (code) => {
        clearTimeout(t);
        reject(new Error(`redis-server exited with ${code}: ${out}`));
      });
    });
    p.removeAllListeners('exit');
  }

  async stop(): Promise<void> {
    const p = this.proc;
    this.proc = undefined;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGKILL');
    });
  }
}
