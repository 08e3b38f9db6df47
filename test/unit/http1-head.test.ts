// net/http1/http1-head.ts: the strict subset it takes, what it leaves to
// node:http, and (fast-check) that any bytes at all get an answer, that heads
// built in the subset read back field for field, and that one byte outside
// the subset anywhere in a head sends it to node:http.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_HEAD_BYTES, readHead, restInSubset, subsetPrefix } from '../../net/http1/http1-head.ts';
import { replyText } from '../../net/http1/http1-reply.ts';
import { Http1Front, type Http1Handler } from '../../net/http1/http1-front.ts';
import { createServer } from 'node:http';
import { setQuiet } from '../../common/logger.ts';

const b = (s: string) => Buffer.from(s, 'latin1');
const HEAD = 'POST /fn/x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}';

describe('readHead', () => {
  it('reads a plain head: method, target, fields in lower case, the body offset', () => {
    const h = readHead(b(HEAD));
    expect(h).toMatchObject({ method: 'POST', target: '/fn/x', contentLength: 2, keepAlive: true, headBytes: HEAD.length - 2 });
    expect(h !== 'partial' && h?.headers.get('host')).toBe('a');
  });

  it('a head not yet ended is partial, until it passes the size limit', () => {
    expect(readHead(b('POST /fn/x HTTP/1.1\r\nHost: a\r\n'))).toBe('partial');
    expect(readHead(b(`POST /fn/x HTTP/1.1\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}`))).toBeUndefined();
  });

  it.each([
    ['Transfer-Encoding', 'POST /fn/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n'],
    ['two Content-Lengths', 'POST /fn/x HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\n'],
    ['a list Content-Length', 'POST /fn/x HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n'],
    ['a signed Content-Length', 'POST /fn/x HTTP/1.1\r\nContent-Length: +2\r\n\r\n'],
    ['a huge Content-Length', 'POST /fn/x HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n'],
    ['Expect', 'POST /fn/x HTTP/1.1\r\nExpect: 100-continue\r\n\r\n'],
    ['Upgrade', 'GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n'],
    ['Connection: upgrade', 'GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n'],
    ['HTTP/1.0', 'POST /fn/x HTTP/1.0\r\n\r\n'],
    ['HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
    ['obs-fold', 'POST /fn/x HTTP/1.1\r\nX: a\r\n b\r\n\r\n'],
    ['bare LF', 'POST /fn/x HTTP/1.1\nX: a\r\n\r\n'],
    ['bare CR', 'POST /fn/x HTTP/1.1\r\nX: a\rb\r\n\r\n'],
    ['NUL', 'POST /fn/x HTTP/1.1\r\nX: a\x00b\r\n\r\n'],
    ['DEL', 'POST /fn/x HTTP/1.1\r\nX: a\x7fb\r\n\r\n'],
    ['non-ASCII', 'POST /fn/x HTTP/1.1\r\nX: caf\xe9\r\n\r\n'],
    ['space before a colon', 'POST /fn/x HTTP/1.1\r\nX : a\r\n\r\n'],
    ['an empty name', 'POST /fn/x HTTP/1.1\r\n: a\r\n\r\n'],
    ['a lower-case method', 'post /fn/x HTTP/1.1\r\n\r\n'],
    ['two spaces in the request line', 'POST  /fn/x HTTP/1.1\r\n\r\n'],
    ['an absolute target', 'POST http://a/fn/x HTTP/1.1\r\n\r\n'],
    ['an asterisk target', 'OPTIONS * HTTP/1.1\r\n\r\n'],
    // issue 37: node:http answers 400 to `Content-Length: 7<TAB>` and keeps a `Connection: close<TAB>` connection open
    ['a tab after a Content-Length value', 'POST /fn/x HTTP/1.1\r\nContent-Length: 2\t\r\n\r\n{}'],
    ['a tab after Connection: close', 'POST /fn/x HTTP/1.1\r\nConnection: close\t\r\n\r\n'],
    ['a tab before a value', 'POST /fn/x HTTP/1.1\r\nX:\ta\r\n\r\n'],
    ['a tab inside a value', 'POST /fn/x HTTP/1.1\r\nX: a\tb\r\n\r\n'],
  ])('%s: left to node:http', (_n, head) => {
    expect(readHead(b(head))).toBeUndefined();
  });

  it('Connection: close (any case, in a list with keep-alive) turns keep-alive off', () => {
    const h = readHead(b('POST /fn/x HTTP/1.1\r\nConnection: Keep-Alive, CLOSE\r\n\r\n'));
    expect(h !== 'partial' && h?.keepAlive).toBe(false);
  });

  it('fuzz: any bytes get an answer (a head, partial or undefined), never an exception', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.boolean(), (bytes, end) => {
        const buf = end ? Buffer.concat([Buffer.from(bytes), b('\r\n\r\n')]) : Buffer.from(bytes);
        const h = readHead(buf);
        expect(h === undefined || h === 'partial' || typeof h === 'object').toBe(true);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 2000) },
    );
  });

  const tchar = fc.constantFrom(..."abcXYZ019-_.!#$%&'*+^`|~");
  const vchar = fc.constantFrom(...'abc XYZ019-_.,;:/="()<>@[]{}?');
  const field = fc.tuple(fc.string({ unit: tchar, minLength: 1, maxLength: 10 }), fc.string({ unit: vchar, maxLength: 20 }));

  it('fuzz: a head built in the subset reads back field for field', () => {
    fc.assert(
      fc.property(fc.uniqueArray(field, { selector: ([n]) => n.toLowerCase(), maxLength: 10 }), fc.nat({ max: 99999 }), (fields, len) => {
        const kept = fields.filter(
          ([n]) => !['content-length', 'connection', 'transfer-encoding', 'expect', 'upgrade'].includes(n.toLowerCase()),
        );
        const text = `PUT /a/b?c=d HTTP/1.1\r\n${kept.map(([n, v]) => `${n}: ${v}\r\n`).join('')}Content-Length: ${len}\r\n\r\n`;
        const h = readHead(b(text));
        if (h === undefined || h === 'partial') throw new Error(`refused: ${JSON.stringify(text)}`);
        expect(h.contentLength).toBe(len);
        expect(h.target).toBe('/a/b?c=d');
        for (const [n, v] of kept) expect(h.headers.get(n.toLowerCase())).toBe(v.replace(/^ +| +$/g, ''));
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 1000) },
    );
  });

  it('fuzz: one byte outside the subset, anywhere in the head, leaves it to node:http', () => {
    const bad = fc.constantFrom(0x00, 0x01, 0x09, 0x0b, 0x0d, 0x0a, 0x7f, 0x80, 0xff);
    fc.assert(
      fc.property(fc.nat({ max: 1000 }), bad, (at, byte) => {
        const text = 'POST /fn/x HTTP/1.1\r\nHost: a\r\nX-Key: k-one\r\nContent-Length: 2\r\n';
        const i = at % text.length;
        const h = readHead(b(`${text.slice(0, i)}${String.fromCharCode(byte)}${text.slice(i)}\r\n`));
        // 'partial' (the byte broke the final CR LF CR LF) is handed over too: the front never serves a partial head.
        if (h === 'partial') return;
        expect(h).toBeUndefined();
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 2000) },
    );
  });
});

describe('subsetPrefix', () => {
  const CLOSE = 'GET /c HTTP/1.1\r\nConnection: close\r\n\r\n';
  it('whole keep-alive requests: the offset past the last one (past the bytes when its body is still to come)', () => {
    expect(subsetPrefix(b(HEAD + HEAD))).toBe(2 * HEAD.length);
    expect(subsetPrefix(b(HEAD + HEAD.slice(0, -1)))).toBe(2 * HEAD.length);
  });

  it('a head cut short, or one with Connection: close at the end, is where checking starts again', () => {
    expect(subsetPrefix(b(HEAD + 'POST /fn/x HTTP/1.1\r\nHo'))).toBe(HEAD.length);
    expect(subsetPrefix(b(HEAD + CLOSE))).toBe(HEAD.length);
  });

  it('-1 (as restInSubset says false) for bytes outside the subset or after Connection: close', () => {
    for (const rest of [HEAD + 'GET /x HTTP/1.0\r\n\r\n', CLOSE + HEAD, HEAD + 'BREW /pot HTTP/1.1\r\n']) {
      expect(subsetPrefix(b(rest))).toBe(-1);
      expect(restInSubset(b(rest))).toBe(false);
    }
  });
});

describe('replyText', () => {
  it("writes node:http's layout: status line, fields in order, Date, Connection and Keep-Alive, the body", () => {
    const t = replyText({ status: 404, headers: { 'x-request-id': 'a', 'content-length': '2' }, body: '{}' }, true, 5000);
    expect(t).toMatch(
      /^HTTP\/1\.1 404 Not Found\r\nx-request-id: a\r\ncontent-length: 2\r\nDate: [^\r]+ GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n\{\}$/,
    );
    expect(replyText({ status: 200, headers: {}, body: '' }, false, 5000)).toMatch(/Connection: close\r\n\r\n$/);
    expect(replyText({ status: 413, headers: { connection: 'close' }, body: '' }, true, 5000)).not.toMatch(
      /Keep-Alive|Connection: keep-alive/,
    );
  });
});

describe('Http1Front.attach', () => {
  const handler: Http1Handler = { maxBody: 1, accepts: () => undefined, serve: async () => undefined };
  it("takes over node:http's one connection listener", () => {
    const server = createServer();
    expect(Http1Front.attach(server, handler, { idleMs: 1000, headersMs: 1000 })).toBeInstanceOf(Http1Front);
    expect(server.listenerCount('connection')).toBe(1);
  });
  it('stays off (node:http serves all) when the server has other connection listeners', () => {
    setQuiet(true);
    const server = createServer();
    server.on('connection', () => undefined);
    expect(Http1Front.attach(server, handler, { idleMs: 1000, headersMs: 1000 })).toBeUndefined();
    expect(server.listenerCount('connection')).toBe(2);
  });
});
