// A strict reader for the plainest HTTP/1.1 request heads, for http1-front.ts.
//
// It takes a deliberately small subset of RFC 9112: one request line
// `METHOD SP target SP HTTP/1.1`, header fields `name: value` with token names
// and printable-ASCII values, CRLF line ends, each name once, a decimal
// Content-Length or none, Connection only `keep-alive` / `close`. Anything
// else (Transfer-Encoding, Expect, Upgrade, obs-fold, bare CR or LF, control
// or non-ASCII bytes, a tab anywhere (node:http does not take a tab as
// whitespace everywhere RFC 9110's OWS allows one, issue 37), a repeated
// field, HTTP/1.0, a head over the limit) is
// not an error here: the reader answers `undefined` and the caller hands the
// bytes, untouched, to node:http, whose parser (llhttp) decides. So no request
// is ever read two ways: either every byte of it is in the subset, or
// node:http reads all of it (request smuggling needs two readers that
// disagree on where a request ends).

export interface Http1Head {
  method: string;
  /** The request target as sent (origin form; the caller matches it). */
  target: string;
  /** Field names in lower case, values with surrounding spaces and tabs removed. */
  headers: Map<string, string>;
  /** The body's length (0 without Content-Length: a request without a body). */
  contentLength: number;
  /** False when the request asked for Connection: close. */
  keepAlive: boolean;
  /** Bytes of the head, its final CRLF CRLF included: the body starts here. */
  headBytes: number;
}

/** Heads above this are node:http's (its default limit is 16 KiB; it answers 431 there). */
export const MAX_HEAD_BYTES = 8192;
const MAX_FIELDS = 64;
const MAX_CONTENT_LENGTH_DIGITS = 9;

/** Methods in the subset: ones node:http's parser knows (another upper-case word is its 400, not ours to serve). */
const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH'];
const REQUEST_LINE = new RegExp(`^(${METHODS.join('|')}) (\\/[\\x21-\\x7e]*) HTTP\\/1\\.1$`);
/** The start of a request line in the subset, cut anywhere. */
const REQUEST_LINE_START = new RegExp(
  `^(?:${METHODS.flatMap((m) => [...m].map((_, i) => m.slice(0, i))).join('|')}|(?:${METHODS.join('|')})(?: (?:\\/[\\x21-\\x7e]*(?: (?:H(?:T(?:T(?:P(?:\\/(?:1(?:\\.1?)?)?)?)?)?)?)?)?)?)?)?\\r?$`,
);
/** Fields that leave a request to node:http. */
const REFUSED_FIELDS = ['transfer-encoding', 'expect', 'upgrade'];
/** The start of a field line in the subset, cut anywhere. */
const FIELD_START = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]*(?::[\x20-\x7e]*)?\r?$/;
const FIELD = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+): *([\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)? *$/;
/** Any byte a head in the subset never holds: controls (HT included) other than CR and LF, DEL, and everything above ASCII. */
const OUTSIDE = /[^\r\n\x20-\x7e]/;
/** A CR not followed by LF, or an LF not preceded by CR. */
const BARE_CR_LF = /\r(?!\n)|(?<!\r)\n/;

/**
 * Whether `buf` (the bytes after a request the front would serve) is a run of
 * whole requests in the subset, the last possibly cut short anywhere, none
 * but the last with Connection: close (node:http's parser refuses bytes
 * after one). Bytes
 * that are not (garbage behind a short Content-Length, a malformed request
 * pipelined behind a good one) make node:http's parser fail as soon as it
 * reads them, before it answers anything of the same read; so the front
 * hands such a connection to node:http before serving, and the answers are
 * node:http's.
 */
export function restInSubset(buf: Buffer): boolean {
  return subsetPrefix(buf) >= 0;
}

/**
 * restInSubset's answer with how far it got: -1 when `buf` is not in the subset; else the offset where the
 * requests not yet known whole and kept alive start (a head cut short, one with Connection: close, or the end of
 * the last whole request, which may lie past `buf`'s end when its body is still to come). Bytes before that offset
 * stay in the subset whatever follows them, so a connection checks only what comes after it again (a pipelined
 * batch is read once, not once per request served).
 */
export function subsetPrefix(buf: Buffer): number {
  let at = 0;
  while (at < buf.length) {
    const rest = buf.subarray(at);
    const h = readHead(rest);
    if (h === undefined) return -1;
    if (h === 'partial') return startsHead(rest.toString('latin1')) ? at : -1;
    const end = at + h.headBytes + h.contentLength;
    if (!h.keepAlive) return end >= buf.length ? at : -1;
    at = end;
  }
  return at;
}

/** A head cut short: its complete lines a head in the subset, its last line the start of one, naming a field the subset takes. */
function startsHead(text: string): boolean {
  if (OUTSIDE.test(text)) return false;
  const cut = text.lastIndexOf('\r\n');
  const last = text.slice(cut < 0 ? 0 : cut + 2);
  if (/\n|\r(?!$)/.test(last)) return false;
  if (cut < 0) return REQUEST_LINE_START.test(last);
  // node:http's parser refuses some fields by their name alone (Transfer-Encoding beside Content-Length, a repeat).
  const done = readHead(Buffer.from(`${text.slice(0, cut)}\r\n\r\n`, 'latin1'));
  if (typeof done !== 'object' || !FIELD_START.test(last)) return false;
  const colon = last.indexOf(':');
  if (colon < 0) return true;
  const name = last.slice(0, colon).toLowerCase();
  return !done.headers.has(name) && !REFUSED_FIELDS.includes(name);
}

/**
 * The head at the start of `buf`: `'partial'` while it has not ended (and is
 * still under MAX_HEAD_BYTES), `undefined` when it is outside the subset.
 */
export function readHead(buf: Buffer): Http1Head | 'partial' | undefined {
  const end = buf.indexOf('\r\n\r\n', 0, 'latin1');
  if (end < 0) return buf.length < MAX_HEAD_BYTES ? 'partial' : undefined;
  if (end + 4 > MAX_HEAD_BYTES) return undefined;
  const text = buf.toString('latin1', 0, end);
  if (OUTSIDE.test(text) || BARE_CR_LF.test(text)) return undefined;
  const lines = text.split('\r\n');
  if (lines.length - 1 > MAX_FIELDS) return undefined;
  const rl = REQUEST_LINE.exec(lines[0]!);
  if (!rl) return undefined;
  const headers = new Map<string, string>();
  for (let i = 1; i < lines.length; i++) {
    const f = FIELD.exec(lines[i]!);
    if (!f) return undefined;
    const name = f[1]!.toLowerCase();
    if (headers.has(name)) return undefined;
    headers.set(name, f[2] ?? '');
  }
  for (const name of REFUSED_FIELDS) if (headers.has(name)) return undefined;
  let contentLength = 0;
  const cl = headers.get('content-length');
  if (cl !== undefined) {
    if (cl.length > MAX_CONTENT_LENGTH_DIGITS || !/^\d+$/.test(cl)) return undefined;
    contentLength = Number(cl);
  }
  let keepAlive = true;
  const conn = headers.get('connection');
  if (conn !== undefined) {
    for (const token of conn.split(',')) {
      const t = token.trim().toLowerCase();
      if (t === 'close') keepAlive = false;
      else if (t !== 'keep-alive') return undefined;
    }
  }
  return { method: rl[1]!, target: rl[2]!, headers, contentLength, keepAlive, headBytes: end + 4 };
}
