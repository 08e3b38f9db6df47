// Who may see the console. The console shows operator state (models,
// functions, deploys, job ids and states), so it is never open to the world:
//
// - with GATEWAY_CONSOLE_TOKEN set, the page shells and assets are served to
//   anyone (they carry no data) and the JSON API needs the token (or the
//   admin token) in X-Console-Token;
// - without it, every console route answers loopback clients only, judged by
//   the connection's own remote address (never a header such as
//   X-Forwarded-For, which any client can write). A loopback request that
//   carries a forwarding header came through a proxy on this host and is
//   refused too: behind a local proxy, the proxy's clients are not local.
import type { Context } from 'hono';
import { sameToken } from '../deploy/admin-routes.ts';
import { gatewayError } from '../core/errors.ts';

/** Headers a reverse proxy adds; their presence means the socket's peer is not the client. */
const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-host'];

/** True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x addresses. */
export function isLoopbackAddress(addr: string | undefined): boolean {
  if (!addr) return false;
  const v4 = addr.startsWith('::ffff:') ? addr.slice(7) : addr;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4) || addr === '::1';
}

/** The remote address of the connection a request came on (@hono/node-server's bindings); undefined elsewhere. */
export function socketAddress(c: Context): string | undefined {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
  return env?.incoming?.socket?.remoteAddress;
}

/** True when the request came straight from this machine: a loopback peer and no proxy in between. */
export function isLocalRequest(c: Context): boolean {
  return isLoopbackAddress(socketAddress(c)) && !FORWARDING_HEADERS.some((h) => c.req.header(h) !== undefined);
}

/** Throws CONSOLE_LOCAL_ONLY unless the console may answer this request when no console token is set. */
export function checkConsoleLocal(c: Context): void {
  if (!isLocalRequest(c)) throw gatewayError('CONSOLE_LOCAL_ONLY');
}

/** Throws CONSOLE_TOKEN_MISSING / _INVALID unless `given` matches the console (or admin) token. */
export function checkConsoleToken(expected: string, admin: string | undefined, given: string | undefined): void {
  if (!given) throw gatewayError('CONSOLE_TOKEN_MISSING');
  if (!sameToken(given, expected) && !(admin && sameToken(given, admin))) throw gatewayError('CONSOLE_TOKEN_INVALID');
}
