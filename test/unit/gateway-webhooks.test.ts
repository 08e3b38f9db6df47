import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { checkCallbackUrl, envAllowlist, matchesPrefix } from '../../gateway/webhooks/callback-allow.ts';
import { backoffDelay, deliverWebhook } from '../../gateway/webhooks/delivery.ts';
import { mapEventToInputs, readPath, checkInbound } from '../../gateway/webhooks/inbound.ts';
import { signBody, signTimestamped, signatureMatches, verifyInbound } from '../../gateway/webhooks/signature.ts';

describe('signatures', () => {
  it('outbound signature is sha256=<hex HMAC-SHA256> (RFC 4231 test case 2)', () => {
    expect(signBody('Jefe', 'what do ya want for nothing?')).toBe(
      'sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
    );
  });

  it('compares only well-formed signatures of the right length, in constant time', () => {
    const good = signBody('k', '{"a":1}');
    expect(signatureMatches(good, good)).toBe(true);
    expect(signatureMatches(good, good.toUpperCase().replace('SHA256=', 'sha256='))).toBe(true);
    expect(signatureMatches(good, signBody('k', '{"a":2}'))).toBe(false);
    expect(signatureMatches(good, good.slice(0, -2))).toBe(false);
    expect(signatureMatches(good, good.replace('sha256=', ''))).toBe(false);
    expect(signatureMatches(good, `sha256=${'zz'.repeat(32)}`)).toBe(false);
    expect(signatureMatches(good, undefined)).toBe(false);
  });

  it('inbound: signature over "<timestamp>.<body>", refused when stale, missing or tampered', () => {
    const now = 1_800_000_000_000;
    const ts = String(now / 1000 - 10);
    const body = Buffer.from('{"data":{"x":1}}');
    const sig = signTimestamped('s3', ts, body);
    expect(verifyInbound('s3', body, sig, ts, 300, now)).toBeNull();
    expect(verifyInbound('s3', Buffer.from('{"data":{"x":2}}'), sig, ts, 300, now)).toBe('bad-signature');
    expect(verifyInbound('other', body, sig, ts, 300, now)).toBe('bad-signature');
    expect(verifyInbound('s3', body, sig, String(now / 1000 - 400), 300, now)).toBe('stale-timestamp');
    // a replay with a fresh timestamp but the old signature fails too
    expect(verifyInbound('s3', body, sig, String(now / 1000), 300, now)).toBe('bad-signature');
    expect(verifyInbound('s3', body, undefined, ts, 300, now)).toBe('missing-signature');
    expect(verifyInbound('s3', body, sig, undefined, 300, now)).toBe('missing-timestamp');
    expect(verifyInbound('s3', body, sig, '1e9', 300, now)).toBe('stale-timestamp');
    const headers: Record<string, string> = { 'x-sig': sig, 'x-ts': ts };
    const s = { secretEnv: 'X', signatureHeader: 'X-Sig', timestampHeader: 'X-Ts', toleranceS: 300, inputs: {} };
    expect(checkInbound(s, 's3', (h) => headers[h.toLowerCase()], body, now)).toBeNull();
  });
});

describe('callback allowlist', () => {
  const allow = ['https://good.com/hooks/', 'http://127.0.0.1:9000/cb', 'https://api.example.org'];
  const ok = (u: string) => 'url' in checkCallbackUrl(u, allow, {});
  it('compares scheme, host, port and path boundary of parsed URLs', () => {
    expect(ok('https://good.com/hooks/a?x=1')).toBe(true);
    expect(ok('https://GOOD.com:443/hooks/a')).toBe(true);
    expect(ok('https://good.com.evil.com/hooks/a')).toBe(false);
    expect(ok('https://good.com@evil.com/hooks/a')).toBe(false);
    expect(ok('https://evil.com/https://good.com/hooks/')).toBe(false);
    expect(ok('http://good.com/hooks/a')).toBe(false);
    expect(ok('https://good.com:8443/hooks/a')).toBe(false);
    expect(ok('https://good.com/hooksx')).toBe(false);
    expect(ok('http://127.0.0.1:9000/cb')).toBe(true);
    expect(ok('http://127.0.0.1:9000/cb/x')).toBe(true);
    expect(ok('http://127.0.0.1:9000/cbx')).toBe(false);
    expect(ok('http://127.0.0.1/cb')).toBe(false);
    expect(ok('https://api.example.org/anything')).toBe(true);
    expect(ok('https://user:pw@api.example.org/')).toBe(false);
    expect(ok('ftp://api.example.org/')).toBe(false);
  });
  it('falls back to GATEWAY_CALLBACK_ALLOW; refuses everything when no list is configured', () => {
    const env = { GATEWAY_CALLBACK_ALLOW: ' http://localhost:8080/ , https://x.io/a ' };
    expect(envAllowlist(env)).toEqual(['http://localhost:8080/', 'https://x.io/a']);
    expect(checkCallbackUrl('http://localhost:8080/z', [], env)).toHaveProperty('url');
    expect(checkCallbackUrl('https://x.io/b', [], env)).toMatchObject({ invalid: false });
    expect(checkCallbackUrl('http://localhost:8080/z', [], {})).toMatchObject({ reason: 'no callback allowlist is configured' });
    expect(checkCallbackUrl('not a url', allow, {})).toMatchObject({ invalid: true });
    expect(matchesPrefix(new URL('http://a.b/'), 'garbage')).toBe(false);
  });
});

describe('backoff', () => {
  it('full jitter: uniform in [0, min(max, base*2^(n-1)))', () => {
    expect(backoffDelay(1, 100, 10_000, () => 0.999)).toBe(99);
    expect(backoffDelay(4, 100, 10_000, () => 0.5)).toBe(400);
    expect(backoffDelay(20, 100, 10_000, () => 0.999)).toBe(9990);
    expect(backoffDelay(3, 100, 10_000, () => 0)).toBe(0);
  });
});

/** A loopback receiver whose behaviour per request is given by `plan`. */
async function receiver(plan: (n: number) => 'ok' | 'fail' | 'hang' | 'redirect') {
  const got: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
  const hanging: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(parts).toString() });
      const what = plan(got.length);
      if (what === 'ok') res.end('thanks');
      else if (what === 'fail') res.writeHead(500).end('nope');
      else if (what === 'redirect') res.writeHead(302, { Location: 'http://127.0.0.1:1/' }).end();
      else hanging.push(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb`;
  return {
    url,
    got,
    close: () => {
      for (const h of hanging) h.destroy();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('delivery to a real receiver', () => {
  const closers: Array<() => Promise<void>> = [];
  afterAll(async () => {
    await Promise.all(closers.map((c) => c()));
  });
  // An attempt's timeout far above a loaded host's answer time: only the case about timeouts sets a short one.
  const base = { jobId: 'job-1', secret: 'sekrit', backoffMs: 5, maxBackoffMs: 20, attemptTimeoutMs: 10_000 };

  it('retries until the receiver answers 2xx; every attempt is signed over the exact body', async () => {
    const r = await receiver((n) => (n <= 2 ? 'fail' : 'ok'));
    closers.push(r.close);
    const body = JSON.stringify({ outputs: { y: { shape: [2], datatype: 'FP32', data: [1, 2.5] } } });
    const attempts: Array<[number, string]> = [];
    const out = await deliverWebhook({ ...base, url: r.url, body, maxAttempts: 5, onAttempt: (n, e) => void attempts.push([n, e]) });
    expect(out).toEqual({ delivered: true, attempts: 3 });
    expect(attempts).toEqual([
      [1, 'HTTP 500 Internal Server Error'],
      [2, 'HTTP 500 Internal Server Error'],
    ]);
    expect(r.got).toHaveLength(3);
    for (const g of r.got) {
      expect(g.body).toBe(body);
      expect(g.headers['x-job-id']).toBe('job-1');
      expect(g.headers['content-type']).toBe('application/json');
      expect(signatureMatches(signBody('sekrit', g.body), g.headers['x-signature-256'] as string)).toBe(true);
    }
  });

  it('a receiver that never answers ends dead after the limit, with the last error', async () => {
    const r = await receiver(() => 'hang');
    closers.push(r.close);
    const t0 = Date.now();
    // Long enough for each attempt to reach the receiver on a loaded host (it counts them).
    const out = await deliverWebhook({ ...base, url: r.url, body: '{}', maxAttempts: 3, attemptTimeoutMs: 400 });
    expect(out).toEqual({ delivered: false, attempts: 3, lastError: 'no answer within 400 ms' });
    expect(r.got).toHaveLength(3);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3 * 400);
  });

  it('redirects are failures, not followed; a closed port is a failure', async () => {
    const r = await receiver(() => 'redirect');
    closers.push(r.close);
    expect(await deliverWebhook({ ...base, url: r.url, body: '{}', maxAttempts: 1 })).toEqual({
      delivered: false,
      attempts: 1,
      lastError: 'HTTP 302 Found',
    });
    const gone = await receiver(() => 'ok');
    await gone.close(); // a port that was just closed
    const dead = await deliverWebhook({ ...base, url: gone.url, body: '{}', maxAttempts: 2 });
    expect(dead).toMatchObject({ delivered: false, attempts: 2, lastError: 'ECONNREFUSED' });
  });
});

describe('inbound event mapping', () => {
  const event = { type: 'photo.created', data: { image_b64: 'aGVsbG8=', tags: [{ v: [1, 2] }], n: 3 } };
  it('reads $.paths with array indexes', () => {
    expect(readPath(event, '$.data.image_b64')).toBe('aGVsbG8=');
    expect(readPath(event, '$.data.tags.0.v')).toEqual([1, 2]);
    expect(readPath(event, '$.data.tags.x')).toBeUndefined();
    expect(readPath(event, '$.data.missing.deeper')).toBeUndefined();
    expect(readPath(event, '$.constructor')).toBeUndefined();
  });
  it('binary inputs take base64, others the value; a missing field names input and path', () => {
    const types: Record<string, string> = { image: 'UINT8', feats: 'FP32', count: 'INT32' };
    expect(mapEventToInputs(event, { image: '$.data.image_b64', feats: '$.data.tags.0.v', count: '$.data.n' }, (i) => types[i])).toEqual({
      inputs: { image: { b64: 'aGVsbG8=' }, feats: [1, 2], count: 3 },
    });
    expect(() => mapEventToInputs(event, { image: '$.data.nope' }, (i) => types[i])).toThrow(
      "event field '$.data.nope' (input 'image') is missing",
    );
    expect(() => mapEventToInputs({ d: 'not base64!' }, { image: '$.d' }, (i) => types[i])).toThrow(/not base64/);
    expect(() => mapEventToInputs(event, { other: '$.type' }, (i) => types[i])).toThrow("the function has no input 'other'");
  });
});
