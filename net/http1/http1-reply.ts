// The bytes of a reply written by http1-front.ts, laid out as node:http
// writes `writeHead(status, headers)` then `end(body)` with a Content-Length:
// the status line, the given fields in order, Date, then Connection and
// Keep-Alive unless the reply set Connection itself.
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';

export interface Http1Reply {
  status: number;
  /** Header fields in writing order, names as they are to be written, values already valid field values. */
  headers: Record<string, string | number>;
  body: string | Buffer;
}

let dateSecond = -1;
let dateText = '';
/** The Date field's value, formatted once a second (as node:http does). */
function httpDate(): string {
  const now = Date.now();
  const s = Math.floor(now / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

/** The reply's head (and a string body) as node:http writes them for writeHead(status, headers) + end(body) with a Content-Length. */
export function replyText(reply: Http1Reply, keepAlive: boolean, idleMs: number): string {
  let text = `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? 'unknown'}\r\n`;
  let ownConnection = false;
  for (const name in reply.headers) {
    if (name.length === 10 && name.toLowerCase() === 'connection') ownConnection = true;
    text += `${name}: ${reply.headers[name]}\r\n`;
  }
  text += `Date: ${httpDate()}\r\n`;
  if (!ownConnection)
    text += keepAlive ? `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(idleMs / 1000)}\r\n` : 'Connection: close\r\n';
  return typeof reply.body === 'string' ? `${text}\r\n${reply.body}` : `${text}\r\n`;
}

/** Writes a reply made by replyText: a string body is in `text` already; a Buffer body goes in one writev with the head. */
export function writeReply(socket: Socket, text: string, body: string | Buffer): void {
  if (typeof body === 'string') {
    socket.write(text);
    return;
  }
  socket.cork();
  socket.write(text, 'latin1');
  socket.write(body);
  socket.uncork();
}
