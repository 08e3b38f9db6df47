// Callback URL allowlist. Entries are URL prefixes (per function, or the
// comma-separated GATEWAY_CALLBACK_ALLOW). A callback matches an entry when,
// after both are parsed with the WHATWG URL parser, the scheme, host and
// port are equal and the path starts at a segment boundary of the entry's
// path. Raw string prefixes are never compared, so `https://good.com.evil.com`
// or `https://good.com@evil.com` cannot pass for `https://good.com`.
// An entry without a port means the scheme's default port.

/** Parse a callback URL; returns the URL or why it is refused. */
export function parseCallbackUrl(raw: string): URL | string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'not an absolute URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return `scheme '${u.protocol.replace(/:$/, '')}' is not http or https`;
  if (u.username || u.password) return 'credentials in the URL are not allowed';
  return u;
}

/** The allowlist from GATEWAY_CALLBACK_ALLOW (comma-separated URL prefixes). */
export function envAllowlist(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.GATEWAY_CALLBACK_ALLOW ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

const effectivePort = (u: URL) => u.port || (u.protocol === 'https:' ? '443' : '80');

/** True when `url` falls under the prefix `entry` (see the file comment). */
export function matchesPrefix(url: URL, entry: string): boolean {
  let p: URL;
  try {
    p = new URL(entry);
  } catch {
    // Fail closed: an entry that is not a URL allows nothing (a function's entries are refused at deploy by its
    // schema; a bad GATEWAY_CALLBACK_ALLOW entry simply matches no callback).
    return false;
  }
  if (p.protocol !== url.protocol || (p.protocol !== 'http:' && p.protocol !== 'https:')) return false;
  if (p.hostname.toLowerCase() !== url.hostname.toLowerCase()) return false;
  if (effectivePort(p) !== effectivePort(url)) return false;
  if (p.username || p.password) return false;
  const base = p.pathname;
  if (base === '/' || base === '') return true;
  if (base.endsWith('/')) return url.pathname.startsWith(base);
  return url.pathname === base || url.pathname.startsWith(`${base}/`);
}

/** Check a callback URL against the function's allowlist, else the environment's; returns the URL or why not. */
export function checkCallbackUrl(
  raw: string,
  functionAllow: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): { url: URL } | { reason: string; invalid: boolean } {
  const u = parseCallbackUrl(raw);
  if (typeof u === 'string') return { reason: u, invalid: true };
  const allow = functionAllow.length ? functionAllow : envAllowlist(env);
  if (!allow.length) return { reason: 'no callback allowlist is configured', invalid: false };
  return allow.some((e) => matchesPrefix(u, e)) ? { url: u } : { reason: 'not in the allowlist', invalid: false };
}
