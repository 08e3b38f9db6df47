// The abusive clients a soak can run beside its load (issue 41), `--abuse=pipeline-flood,slow-reader`:
// - pipeline-flood: every second, one connection writes `--flood-calls` (2,000) /fn calls in one write and reads
//   every reply; each must be 200 or 503 GATEWAY_BUSY (the gateway's in-flight bounds), and all must come;
// - slow-reader: every second, one connection pipelines 500 calls, reads nothing for 2 s, then reads them all.
// A reply that never comes (20 s) counts as a lost call; `cutConnections` counts the connections the
// gateway closed before every reply came, `lateConnections` those still open at the 20 s mark, and
// `slowestMs` the longest a connection took to get all its replies.
import net from 'node:net';

export interface AbuseCounts {
  connections: number;
  ok: number;
  busy: number;
  other: number;
  lost: number;
  cutConnections: number;
  lateConnections: number;
  slowestMs: number;
}

export const ABUSE_KINDS = ['pipeline-flood', 'slow-reader'] as const;

function oneConnection(port: number, request: string, count: number, pauseMs: number, c: AbuseCounts): Promise<void> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    let seen = 0;
    let finished = false;
    const t0 = Date.now();
    const done = (why: 'all' | 'late' | 'cut') => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (why === 'late') c.lateConnections++;
      if (why === 'cut' && seen < count) c.cutConnections++;
      if (why === 'all') c.slowestMs = Math.max(c.slowestMs, Date.now() - t0);
      const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
      for (const st of statuses) {
        if (st === '200') c.ok++;
        else if (st === '503') c.busy++;
        else c.other++;
      }
      c.lost += Math.max(0, count - statuses.length);
      s.destroy();
      resolve();
    };
    const timer = setTimeout(() => done('late'), 20_000);
    s.setEncoding('latin1');
    s.on('error', () => done('cut'));
    s.on('close', () => done('cut'));
    s.on('data', (d: string) => {
      text += d;
      seen = (text.match(/HTTP\/1\.1 \d{3}/g) ?? []).length;
      if (seen >= count && text.endsWith('}')) done('all');
    });
    s.once('connect', () => {
      c.connections++;
      if (pauseMs > 0) {
        s.pause();
        setTimeout(() => s.resume(), pauseMs);
      }
      s.write(request.repeat(count));
    });
  });
}

/** Runs the chosen abusive clients until `end` (ms since epoch); returns their counts. */
export async function runAbuse(
  kinds: string[],
  port: number,
  body: string,
  apiKey: string,
  end: number,
  floodCalls = 2000,
): Promise<Record<string, AbuseCounts>> {
  const req = `POST /fn/product_recommender HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-API-Key: ${apiKey}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  // The same call with a repeated field, which the lean front hands to node:http: half the floods run on each front.
  const handed = req.replace('Host: 127.0.0.1\r\n', 'Host: 127.0.0.1\r\nX-Dup: a\r\nX-Dup: b\r\n');
  const out: Record<string, AbuseCounts> = {};
  await Promise.all(
    kinds.map(async (k, i) => {
      const c = (out[k] = { connections: 0, ok: 0, busy: 0, other: 0, lost: 0, cutConnections: 0, lateConnections: 0, slowestMs: 0 });
      for (let n = 0; Date.now() < end; n++) {
        if (k === 'pipeline-flood') await oneConnection(port, n % 2 ? handed : req, floodCalls, 0, c);
        else if (k === 'slow-reader') await oneConnection(port, req, 500, 2000, c);
        else throw new Error(`--abuse: '${k}' is not one of ${ABUSE_KINDS.join(', ')}`);
        await new Promise((r) => setTimeout(r, 1000 + i * 100));
      }
    }),
  );
  return out;
}
