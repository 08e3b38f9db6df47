// The HTTP/1.1 front's pipelining budget (net/http1/http1-connection.ts,
// Http1FrontOptions.pipelinePerTurn; issue 37): a connection that pipelined
// thousands of requests in one write, served by a handler that answers
// without waiting on I/O, yields a turn of the event loop after each
// pipelinePerTurn of them, so another connection's request is served before
// the batch is done; every reply still comes, in order.
import { createServer, type Server } from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Http1Front, type Http1Handler } from '../../net/http1/http1-front.ts';
import { PIPELINE_PER_TURN } from '../../net/http1/http1-handler.ts';

const servers: Server[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

const get = (target: string) => `GET ${target} HTTP/1.1\r\nHost: a\r\n\r\n`;

/** Reads replies off `s` until `count` status lines came; resolves with their bodies in order. */
function replies(s: net.Socket, count: number): Promise<string[]> {
  return new Promise((resolve) => {
    let text = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      text += d;
      const bodies = [...text.matchAll(/\r\n\r\n(\/[a-z0-9]+)/g)].map((m) => m[1]!);
      if (bodies.length >= count) resolve(bodies);
    });
  });
}

describe('Http1Front pipelining budget', () => {
  it('thousands of requests pipelined in one write: another connection is served before they are all done', async () => {
    const served: string[] = [];
    let other: net.Socket | undefined;
    const handler: Http1Handler<string> = {
      maxBody: 1024,
      accepts: (head) => head.target,
      serve: async ({ route }) => {
        served.push(route);
        if (route === '/a0') other!.write(get('/b'));
        return { status: 200, headers: { 'Content-Length': route.length }, body: route };
      },
    };
    const server = createServer();
    Http1Front.attach(server, handler, { idleMs: 5000, headersMs: 5000 });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    const connect = async () => {
      const s = net.connect(port, '127.0.0.1');
      sockets.push(s);
      await new Promise((r) => s.once('connect', r));
      return s;
    };
    const a = await connect();
    other = await connect();
    const count = 2000; // 60 KB: one read
    const aReplies = replies(a, count);
    const bReply = replies(other, 1);
    a.write(Array.from({ length: count }, (_, i) => get(`/a${i}`)).join(''));
    expect(await bReply).toEqual(['/b']);
    expect(await aReplies).toEqual(Array.from({ length: count }, (_, i) => `/a${i}`));
    const bAt = served.indexOf('/b');
    expect(bAt).toBeGreaterThan(0);
    expect(bAt).toBeLessThan(10 * PIPELINE_PER_TURN);
  });

  it('a pipelined batch whose reads end inside a head or a body stays with the front (node:http is not handed the rest)', async () => {
    const handler: Http1Handler<string> = {
      maxBody: 1024,
      accepts: (head) => head.target,
      serve: async ({ route }) => ({ status: 200, headers: { 'Content-Length': route.length }, body: route }),
    };
    // node:http would answer what it is handed with /node: every reply must be the front's.
    const server = createServer((_req, res) => res.end('/node'));
    const front = Http1Front.attach(server, handler, { idleMs: 5000, headersMs: 5000 })!;
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const s = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    sockets.push(s);
    await new Promise((r) => s.once('connect', r));
    const post = (i: number) => `POST /a${i} HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello`;
    const count = 300;
    const batch = Buffer.from(Array.from({ length: count }, (_, i) => post(i)).join(''), 'latin1');
    const got = replies(s, count);
    // Pieces of 997 bytes end anywhere: inside request lines, fields, the blank line and bodies.
    for (let at = 0; at < batch.length; at += 997) {
      s.write(batch.subarray(at, at + 997));
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(await got).toEqual(Array.from({ length: count }, (_, i) => `/a${i}`));
    expect(front.stats.handedOff).toBe(0);
  });
});
