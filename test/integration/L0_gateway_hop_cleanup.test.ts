// test/bench/gateway-hop.ts leaves no temp dirs behind: its request bodies
// (gw-hop-*) and the FastAPI peer's generated stubs (fastapi-stubs-*, when
// the peer's Debian packages are here) are removed when it finishes, and
// when it is stopped by a signal mid-run, and no process it started outlives
// it. Runs it with TMPDIR set to a
// private dir (one short round, the local-channel row only) and lists it.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { which } from '../bench/c-clients.ts';
import { ROOT } from '../bench/processes.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Run gateway-hop.ts under a private TMPDIR; `stopAt`: SIGTERM it once stderr shows this. */
async function hop(stopAt?: string): Promise<{ code: number | null; signal: string | null; tmp: string; err: string; seen: string[] }> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'l0-hop-'));
  dirs.push(tmp);
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/gateway-hop.ts', '--rounds=2', '--secs=1', '--only=gw-local'], {
    cwd: ROOT,
    env: { ...process.env, TMPDIR: tmp },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  const seen = new Set<string>();
  const ours = () => readdirSync(tmp).filter((n) => /^(gw-hop-|fastapi-stubs-)/.test(n));
  child.stderr.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-4000);
    for (const n of ours()) seen.add(n.replace(/-.*$/, ''));
    if (stopAt && err.includes(stopAt)) child.kill('SIGTERM');
  });
  const [code, signal] = await new Promise<[number | null, string | null]>((r) => child.once('exit', (c, s) => r([c, s])));
  return { code, signal, tmp, err, seen: [...seen].sort() };
}

const ourDirs = (tmp: string) => readdirSync(tmp).filter((n) => /^(gw-hop-|fastapi-stubs-)|\.sock$/.test(n));

/** Processes still running with the private TMPDIR in their command line (the engine, gateways and FastAPI peer all have it). */
function survivors(tmp: string): string[] {
  const out: string[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue; // gone meanwhile
    }
    if (cmd.includes(tmp)) out.push(`${pid} ${cmd}`);
  }
  return out;
}

describe.skipIf(!which('wrk'))('L0_gateway_hop_cleanup', () => {
  it('removes its temp dirs when it finishes', async () => {
    const r = await hop();
    expect(r.code, r.err).toBe(0);
    expect(r.seen).toContain('gw'); // it did use the private TMPDIR
    expect(ourDirs(r.tmp)).toEqual([]);
    expect(survivors(r.tmp)).toEqual([]);
  }, 180_000);

  it('removes them when stopped by a signal mid-run', async () => {
    const r = await hop('round 1 gw-local');
    expect(r.code, r.err).toBe(130);
    expect(r.seen).toContain('gw');
    expect(ourDirs(r.tmp)).toEqual([]);
    // Every process it started ends with it, the FastAPI peer included (it used to outlive a stopped run).
    // wrk, the load generator, may still be in its last round: it ends by itself within its -d (1 s here).
    const deadline = Date.now() + 3000;
    while (survivors(r.tmp).length && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
    expect(survivors(r.tmp)).toEqual([]);
  }, 180_000);
});
