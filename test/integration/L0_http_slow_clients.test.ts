// Slow clients on the engine's HTTP and metrics ports (issue 21, item 7),
// with a real slowloris client over TCP: headers dripped a byte at a time,
// a body that never completes, a connection that says nothing, and a kept
// alive one left idle. Each is answered 408 (JSON error) or closed within
// its limit, where Node's defaults kept them for a minute or more.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

const T = { headersMs: 1000, bodyMs: 1000, idleMs: 500 };
let engine: RunningEngine;
let repo: string;

beforeAll(async () => {
  repo = tempRepo('l0-slow', []);
  engine = await startTestEngine({ modelRepository: repo, httpTimeouts: T });
}, 60_000);
afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

/** Connect, then send `chunks` one every `everyMs` (looping the last one); resolve with what came back and when the server closed. */
function slowClient(
  port: number,
  first: string,
  drip: string | undefined,
  everyMs: number,
  giveUpMs: number,
): Promise<{ reply: string; closedAfterMs: number | undefined }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const s = net.connect(port, '127.0.0.1');
    let reply = '';
    let timer: NodeJS.Timeout | undefined;
    const finish = (closed: boolean) => {
      clearInterval(timer);
      clearTimeout(giveUp);
      s.destroy();
      resolve({ reply, closedAfterMs: closed ? Date.now() - started : undefined });
    };
    const giveUp = setTimeout(() => finish(false), giveUpMs);
    s.on('connect', () => {
      if (first) s.write(first);
      if (drip !== undefined) timer = setInterval(() => s.writable && s.write(drip), everyMs);
    });
    s.on('data', (d: Buffer) => (reply += d.toString()));
    s.on('close', () => finish(true));
    s.on('error', () => undefined);
  });
}

// Concurrent: each case is its own connection, timed from its own connect against the engine's timers; none
// waits on another, so the eight wait out their limits together (issue 38).
describe.concurrent('L0_http_slow_clients', () => {
  for (const which of ['HTTP', 'metrics'] as const) {
    const port = () => (which === 'HTTP' ? engine.httpPort : engine.metricsPort);
    const target = which === 'HTTP' ? '/v2/health/live' : '/metrics';

    it(`${which}: headers dripped a byte every 200 ms get a 408 and a close within the header limit`, async () => {
      const r = await slowClient(port(), `GET ${target} HTTP/1.1\r\nHost: x\r\n`, 'X', 200, 8000);
      expect(r.closedAfterMs).toBeDefined();
      expect(r.closedAfterMs!).toBeLessThan(T.headersMs + 2500);
      expect(r.reply).toMatch(/^HTTP\/1.1 408 Request Timeout\r\n/);
      expect(JSON.parse(r.reply.split('\r\n\r\n')[1]!).error).toContain('request not received in time');
    });

    it(`${which}: a body that never completes is cut off after headers + body limits`, async () => {
      const r = await slowClient(
        port(),
        `POST ${which === 'HTTP' ? '/v2/repository/index' : target} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n`,
        'x',
        200,
        8000,
      );
      expect(r.closedAfterMs).toBeDefined();
      expect(r.closedAfterMs!).toBeLessThan(T.headersMs + T.bodyMs + 2500);
    });

    // The HTTP port's connections start on the HTTP/1.1 front (net/http1), which keeps this deadline itself (issue 37).
    it(`${which}: a connection that sends nothing gets a 408 and a close within the header limit (node:http headersTimeout)`, async () => {
      const r = await slowClient(port(), '', undefined, 0, 8000);
      expect(r.closedAfterMs).toBeDefined();
      expect(r.closedAfterMs!).toBeGreaterThanOrEqual(T.headersMs - 50);
      expect(r.closedAfterMs!).toBeLessThan(T.headersMs + 2500);
      expect(r.reply).toMatch(/^HTTP\/1.1 408 Request Timeout\r\n/);
      expect(JSON.parse(r.reply.split('\r\n\r\n')[1]!).error).toContain('request not received in time');
    });

    it(`${which}: a kept-alive connection idle after its answer is closed after the idle limit`, async () => {
      const r = await slowClient(port(), `GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`, undefined, 0, 8000);
      expect(r.reply).toMatch(/^HTTP\/1.1 200 OK/);
      expect(r.closedAfterMs).toBeDefined();
      expect(r.closedAfterMs!).toBeLessThan(T.idleMs + 2000);
    });
  }

  it('the flags and their defaults (15 s headers, 120 s body, 5 s idle)', () => {
    expect(parseEngineArgs(['--model-repository=/m']).httpTimeouts).toEqual({ headersMs: 15_000, bodyMs: 120_000, idleMs: 5_000 });
    const o = parseEngineArgs([
      '--model-repository=/m',
      '--http-header-timeout-ms=2000',
      '--http-body-timeout-ms=3000',
      '--http-idle-timeout-ms=400',
    ]);
    expect(o.httpTimeouts).toEqual({ headersMs: 2000, bodyMs: 3000, idleMs: 400 });
    expect(() => parseEngineArgs(['--model-repository=/m', '--http-header-timeout-ms=0'])).toThrow(
      '--http-header-timeout-ms: expected a positive integer',
    );
  });
});
