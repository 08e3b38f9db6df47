// Differential test of the lean HTTP/1.1 front (net/http1/http1-front.ts)
// against node:http (issue 37): byte-level mutations of requests (line
// endings, whitespace and tabs around names and values, header name bytes,
// duplicate or malformed Content-Length, Transfer-Encoding variants, chunk
// sizes and extensions, short Content-Length followed by garbage, 2-3
// pipelined requests split anywhere) go to a server with the front and to a
// plain node:http server answering the same handler; the status codes, the
// number of replies and whether the server closed must be the same, or differ
// only as DIFFERENCES (docs/engine/h2-front.md#differential-tests) says.
// FUZZ_RUNS raises the number of generated cases. A second pair of servers
// with a short head deadline holds the front's headersTimeout to node:http's:
// silent connections, trickled heads, heads queued behind a request in progress.
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Http1Front, type Http1FrontOptions, type Http1Handler } from '../../net/http1/http1-front.ts';
import { eachConcurrently } from '../fixtures/concurrently.ts';
import { splitReplies } from '../fixtures/http1-exchange.ts';

/** How long /slow takes to answer (a request in progress while the next head arrives). */
const SLOW_MS = 1200;
const ROUTES = ['/echo', '/hello', '/slow'];
const later = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The same answer from both: 200 with the body's length for /echo, 200 `hi` for /hello and (after SLOW_MS) /slow, 404 otherwise. */
function nodeHandler(req: IncomingMessage, res: ServerResponse): void {
  let n = 0;
  req.on('data', (d: Buffer) => (n += d.length));
  req.on('end', async () => {
    if (req.url === '/slow') await later(SLOW_MS);
    const known = ROUTES.includes(req.url!);
    const body = req.url === '/echo' ? `len=${n}` : known ? 'hi' : 'no';
    res.writeHead(known ? 200 : 404, { 'content-type': 'text/plain', 'content-length': body.length });
    res.end(body);
  });
}

const frontHandler: Http1Handler<string> = {
  maxBody: 1 << 20,
  accepts: (head) => (ROUTES.includes(head.target) ? head.target : undefined),
  serve: async (req) => {
    if (req.route === '/slow') await later(SLOW_MS);
    const body = req.route === '/echo' ? `len=${req.body.length}` : 'hi';
    return { status: 200, headers: { 'content-type': 'text/plain', 'content-length': body.length }, body };
  },
};

/** A server with the front and a plain node:http server, the same handler and limits on both. */
interface Pair {
  withFront: Server;
  plain: Server;
  front: Http1Front;
}
let pair: Pair;
/**
 * Pairs with a short head deadline (node:http checks its deadlines every 50 ms there): one for each case of
 * the headersTimeout tests, so that they run side by side and each counts only its own late heads.
 */
const deadlinePairs: Pair[] = [];
const HEADERS_MS = 500;
const port = (s: Server) => (s.address() as AddressInfo).port;

async function startPair(options: ServerOptions, front: Http1FrontOptions): Promise<Pair> {
  const p = { withFront: createServer(options, nodeHandler), plain: createServer(options, nodeHandler) };
  const f = Http1Front.attach(p.withFront, frontHandler, front)!;
  await Promise.all([p.withFront, p.plain].map((s) => new Promise<void>((r) => s.listen(0, '127.0.0.1', r))));
  return { ...p, front: f };
}

async function startDeadlinePair(): Promise<Pair> {
  const p = await startPair(
    { headersTimeout: HEADERS_MS, requestTimeout: 10_000, keepAliveTimeout: 2000, connectionsCheckingInterval: 50 },
    { idleMs: 2000, headersMs: HEADERS_MS },
  );
  deadlinePairs.push(p);
  return p;
}

beforeAll(async () => {
  pair = await startPair({}, { idleMs: 5000, headersMs: 60_000 });
});

afterAll(async () => {
  for (const s of [pair, ...deadlinePairs].flatMap((p) => (p ? [p.withFront, p.plain] : []))) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** talk()'s quiet period is checked every QUIET_STEP_MS, each check a timer of its own, and lasts QUIET_TURNS checks at least. */
const QUIET_STEP_MS = 5;
const QUIET_TURNS = 24;

interface Outcome {
  statuses: number[];
  closed: boolean;
}

/**
 * Write `parts` (each after `gapMs`), then read until the server closes or stays quiet `quietMs`, and
 * QUIET_TURNS turns of the event loop (reads included) at least: on a busy machine one pause of this
 * process can outlast the whole quiet period, and a single timer would then fire before the servers (here,
 * in this process) had read the bytes.
 */
function talk(p: number, parts: string[], gapMs: number, quietMs = 120): Promise<Outcome> {
  return new Promise((resolve) => {
    const s = net.connect(p, '127.0.0.1');
    let got = Buffer.alloc(0);
    let closed = false;
    let quiet: NodeJS.Timeout | undefined;
    let written = false;
    let steps = 0;
    let since = 0;
    const finish = () => {
      clearTimeout(quiet);
      s.destroy();
      const statuses = splitReplies(got).replies.map((r) => Number(/^HTTP\/1\.1 (\d{3})/.exec(r)?.[1] ?? 0));
      resolve({ statuses, closed });
    };
    const step = () => {
      if (++steps >= QUIET_TURNS && performance.now() - since >= quietMs) finish();
      else quiet = setTimeout(step, QUIET_STEP_MS);
    };
    const rearm = () => {
      clearTimeout(quiet);
      steps = 0;
      since = performance.now();
      if (written) quiet = setTimeout(step, QUIET_STEP_MS);
    };
    s.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      rearm();
    });
    const gone = () => {
      if (closed) return;
      closed = true;
      setTimeout(finish, 10);
    };
    s.on('end', gone);
    s.on('close', gone);
    s.on('error', gone);
    void (async () => {
      for (const [i, part] of parts.entries()) {
        if (gapMs && i > 0) await new Promise((r) => setTimeout(r, gapMs));
        if (!s.destroyed) s.write(part, 'latin1');
      }
      written = true;
      rearm();
    })();
  });
}

/**
 * Where the front may answer otherwise than node:http, and why (the same
 * table is in docs/engine/h2-front.md#differential-tests): each entry says
 * when it applies, given both outcomes; anything else must match.
 */
const DIFFERENCES: Array<{ why: string; applies: (ours: Outcome, theirs: Outcome) => boolean }> = [
  {
    why:
      'A malformed request pipelined behind good ones in one read: node:http answers the good ones first when it reads the ' +
      'socket itself (its parser calls back per request), but not when the front hands it the same bytes in one piece ' +
      '(the parse error comes first). Either way the malformed one gets 400 and the connection closes; the front serves none.',
    applies: (ours, theirs) =>
      ours.closed &&
      theirs.closed &&
      ours.statuses.length < theirs.statuses.length &&
      ours.statuses.every((st, i) => st === theirs.statuses[theirs.statuses.length - ours.statuses.length + i]) &&
      ours.statuses.at(-1) === 400,
  },
];

/** Both servers' outcomes for the same bytes (on `on`): ours, and the DIFFERENCES entry that explains a difference. */
async function differ(
  parts: string[],
  gapMs: number,
  on: Pair,
  quietMs?: number,
): Promise<{ ours: Outcome; known?: (typeof DIFFERENCES)[number] }> {
  const [ours, theirs] = await Promise.all([talk(port(on.withFront), parts, gapMs, quietMs), talk(port(on.plain), parts, gapMs, quietMs)]);
  if (JSON.stringify(ours) === JSON.stringify(theirs)) return { ours };
  const known = DIFFERENCES.find((d) => d.applies(ours, theirs));
  expect(known, `front ${JSON.stringify(ours)} vs node:http ${JSON.stringify(theirs)} on ${JSON.stringify(parts)}`).toBeDefined();
  return { ours, known };
}

/** One case by itself: as differ(), and where the front must serve none of the requests, its served count did not move. */
async function compare(parts: string[], gapMs = 0, on = pair, quietMs?: number): Promise<Outcome> {
  const servedBefore = on.front.stats.served;
  const { ours, known } = await differ(parts, gapMs, on, quietMs);
  if (known === DIFFERENCES[0]) expect(on.front.stats.served, 'the front served none of them').toBe(servedBefore);
  return ours;
}

/** Cases on their own connections at once (each pair waits out its own quiet period, none times another). */
const AT_ONCE = 32;

/**
 * Every case as compare() does on `pair`, AT_ONCE at a time. The front's
 * served count is one for all connections, so a case that must leave it alone
 * is then run again by itself (compare) to check that.
 */
async function compareAll(cases: Array<{ parts: string[]; gapMs?: number }>): Promise<void> {
  const alone: typeof cases = [];
  await eachConcurrently(cases, AT_ONCE, async (c) => {
    if ((await differ(c.parts, c.gapMs ?? 0, pair)).known === DIFFERENCES[0]) alone.push(c);
  });
  for (const c of alone) await compare(c.parts, c.gapMs);
}

// ---- generators ----

/** Mostly the plain value (so most cases are one or two mutations away from a request the front serves), sometimes another. */
const mostly = <T>(plain: T, ...others: T[]) =>
  fc.oneof({ weight: 12, arbitrary: fc.constant(plain) }, { weight: 1, arbitrary: fc.constantFrom(...others) });
const eol = mostly('\r\n', '\n', '\r', '\r\r\n');
const ows = mostly(' ', '', '  ', '\t', ' \t', '\t ');
const nameNoise = mostly('', ' ', '\t', '"', '(', '@', '\x00', '\x7f', '\xe9', '_', '.', '~');
const contentLength = mostly('2', '02', '+2', '-2', '2, 2', '2,3', '0x2', ' 2', '', '99999999999', '1', '3', '2\t');
const transferEncoding = mostly<string | undefined>(
  undefined,
  'chunked',
  'Chunked',
  'gzip, chunked',
  'chunked, gzip',
  'identity',
  'chunked\t',
  ' chunked',
);
const chunkSize = mostly('2', '02', '2;ext=1', '2 ;x', '0x2', ' 2', '2 ', 'A', '-2', '2\t');

/** One request: its parts mutated, as text. */
const request = fc
  .record({
    method: mostly('POST', 'GET', 'post', 'PO ST', 'PUT', 'FOO', 'GARBAGE'),
    target: mostly('/echo', '/hello', '/nope', 'echo', '/echo?x=1'),
    version: mostly('HTTP/1.1', 'HTTP/1.0', 'HTTP/1.2', 'http/1.1'),
    eols: fc.array(eol, { minLength: 6, maxLength: 6 }),
    ows: fc.array(ows, { minLength: 4, maxLength: 4 }),
    noise: fc.tuple(nameNoise, fc.nat({ max: 12 })),
    cl: fc.option(contentLength, { freq: 8 }),
    dupCl: mostly<string | null>(null, '2', '3', '2, 2', ''),
    te: transferEncoding,
    chunk: chunkSize,
    connection: mostly<string | undefined>(undefined, 'close', 'keep-alive', 'close\t', 'Close', 'upgrade', '\tclose'),
    trailing: mostly('', 'GARBAGE', 'xyz\r\n\r\n', '\r\n', 'G'),
  })
  .map((r) => {
    const [e0, e1, e2, e3, e4, e5] = r.eols as [string, string, string, string, string, string];
    const [o0, o1, o2, o3] = r.ows as [string, string, string, string];
    const [noise, at] = r.noise;
    const xName = `X-Key`.slice(0, at % 6) + noise + `X-Key`.slice(at % 6);
    let head = `${r.method} ${r.target} ${r.version}${e0}Host:${o0}a${o1}${e1}${xName}:${o2}v${o3}${e2}`;
    if (r.cl !== null) head += `Content-Length: ${r.cl}${e3}`;
    if (r.dupCl !== null) head += `content-length: ${r.dupCl}${e3}`;
    if (r.te !== undefined) head += `Transfer-Encoding: ${r.te}${e4}`;
    if (r.connection !== undefined) head += `Connection: ${r.connection}${e4}`;
    head += e5;
    const body = r.te?.includes('chunked') ? `${r.chunk}\r\nab\r\n0\r\n\r\n` : 'ab';
    return head + body + r.trailing;
  });

const RUNS = Number(process.env.FUZZ_RUNS ?? 60);
/** Generated cases per property run, compared at once (compareAll); RUNS / BATCH runs. */
const BATCH = 10;

describe('L0_http1_differential: the HTTP/1.1 front against node:http on mutated bytes', () => {
  it('fuzz: one mutated request (line endings, whitespace, tabs, names, Content-Length, Transfer-Encoding, chunks)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: BATCH, maxLength: BATCH }), async (texts) =>
        compareAll(texts.map((text) => ({ parts: [text] }))),
      ),
      { numRuns: Math.ceil(RUNS / BATCH) },
    );
  }, 60_000);

  it('fuzz: 2-3 pipelined (mutated) requests in one write and split in two at any byte', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.array(request, { minLength: 2, maxLength: 3 }), fc.nat()), { minLength: BATCH, maxLength: BATCH }),
        async (pipelines) =>
          compareAll(
            pipelines.flatMap(([reqs, at]) => {
              const all = reqs.join('');
              const i = 1 + (at % (all.length - 1));
              return [{ parts: [all] }, { parts: [all.slice(0, i), all.slice(i)], gapMs: 15 }];
            }),
          ),
      ),
      { numRuns: Math.ceil(RUNS / 3 / BATCH) },
    );
  }, 60_000);

  it('two and three plain pipelined requests split at every byte boundary', async () => {
    const one = 'POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab';
    const cuts = [2, 3].flatMap((n) => {
      const all = one.repeat(n);
      return Array.from({ length: all.length - 1 }, (_, i) => ({ parts: [all.slice(0, i + 1), all.slice(i + 1)], gapMs: 15 }));
    });
    await compareAll(cuts);
  }, 60_000);

  it('issue 41: a short Content-Length followed by garbage is answered once, as node:http answers it', async () => {
    const before = pair.front.stats.served;
    await compare(['POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nabGARBAGE\r\n\r\n']);
    await compare(['POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nabGARBAGE']);
    const r = await talk(port(pair.withFront), ['POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nabGARBAGE'], 0);
    expect(r.statuses).toHaveLength(1);
    expect(pair.front.stats.served).toBe(before);
  });

  it('issue 37: a tab as whitespace (Content-Length: 2<TAB>, Connection: close<TAB>) is answered as node:http answers it', async () => {
    await compare(['POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\t\r\n\r\nab']);
    await compare(['POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\t\r\n\r\nab']);
    await compare(['POST /echo HTTP/1.1\r\nHost: a\r\nX-Key:\tv\r\nContent-Length: 2\r\n\r\nab']);
  });
});

// Concurrent (issue 38): each case on its own pair of servers, so its count of late heads is its own.
describe.concurrent('L0_http1_differential: node:http headersTimeout (RFC 9112 §9.5, RFC 9110 §15.5.9 408) kept by the front itself', () => {
  /** `text`, then a byte every 100 ms for 2 s: a head that never ends (slowloris). */
  const trickled = (text: string) => [text, ...Array<string>(20).fill('a')];
  const quiet = 1500;
  const cases: Array<{ name: string; parts: string[]; gapMs: number; expected: Outcome; timedOut: number }> = [
    { name: 'a connection that sends nothing', parts: [], gapMs: 0, expected: { statuses: [408], closed: true }, timedOut: 1 },
    {
      name: 'a head trickled from the start (the front hands it to node:http at once)',
      parts: trickled('POST /echo HTTP/1.1\r\nHost: a\r\nX-Key: '),
      gapMs: 100,
      expected: { statuses: [408], closed: true },
      timedOut: 0,
    },
    {
      // The head came in the same read as the request before it (a pipelined batch cut inside a head): the front keeps
      // the connection and times the head itself (issue 37), with node:http's answer.
      name: 'a request served, then the next head trickled',
      parts: trickled('POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nabPOST /echo HTTP/1.1\r\nX-Key: '),
      gapMs: 100,
      expected: { statuses: [200, 408], closed: true },
      timedOut: 1,
    },
    {
      name: 'a head trickled behind a request in progress: 408 before that request answers, as node:http',
      parts: trickled(`GET /slow HTTP/1.1\r\nHost: a\r\n\r\nPOST /echo HTTP/1.1\r\nX-Key: `),
      gapMs: 100,
      expected: { statuses: [408], closed: true },
      timedOut: 1,
    },
    {
      name: 'a whole request behind a request in progress longer than the deadline: both answered',
      parts: ['GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n'],
      gapMs: 0,
      expected: { statuses: [200, 200], closed: false },
      timedOut: 0,
    },
    {
      name: 'a head behind a request in progress that ends within the deadline: both answered',
      parts: ['GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\n', 'Host: a\r\n', '\r\n'],
      gapMs: 150,
      expected: { statuses: [200, 200], closed: false },
      timedOut: 0,
    },
  ];
  for (const c of cases)
    it(c.name, async () => {
      const deadlines = await startDeadlinePair();
      const before = deadlines.front.stats.headTimeouts;
      expect(await compare(c.parts, c.gapMs, deadlines, quiet)).toEqual(c.expected);
      expect(deadlines.front.stats.headTimeouts - before, 'late heads the front itself answered').toBe(c.timedOut);
    });
});
