// Is a received header list a well-formed HTTP/2 request (RFC 9113 §8.1.1,
// §8.2, §8.3)? A malformed one is a stream error of type PROTOCOL_ERROR
// (h2-connection.ts resets the stream). One pass over the decoded fields, in
// the order they came (the order matters: pseudo-headers first).

/** Pseudo-headers a request may carry (RFC 9113 §8.3.1; `:protocol` only with RFC 8441, which we do not advertise). */
const REQUEST_PSEUDO = new Set([':method', ':scheme', ':path', ':authority']);
/** Connection-specific fields HTTP/2 forbids (RFC 9113 §8.2.2). */
const CONNECTION_SPECIFIC = new Set(['connection', 'proxy-connection', 'keep-alive', 'transfer-encoding', 'upgrade']);

/** RFC 9113 §8.2.1: no 0x00-0x20, no uppercase, no 0x7f-0xff; a colon only as a pseudo-header's first character. */
function badName(name: string): string | undefined {
  if (name.length === 0) return 'an empty field name';
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || (c >= 0x41 && c <= 0x5a) || (c === 0x3a && i > 0))
      return `field name '${name}' has a character HTTP/2 forbids (RFC 9113 §8.2.1)`;
  }
  return undefined;
}

/** RFC 9113 §8.2.1: no NUL, CR or LF; no leading or trailing space or tab. */
function badValue(name: string, v: string): string | undefined {
  if (v.length === 0) return undefined;
  const first = v.charCodeAt(0);
  const last = v.charCodeAt(v.length - 1);
  if (first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09)
    return `field '${name}' value starts or ends with whitespace (RFC 9113 §8.2.1)`;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c === 0 || c === 0x0a || c === 0x0d) return `field '${name}' value has NUL, CR or LF (RFC 9113 §8.2.1)`;
  }
  return undefined;
}

/** Why the fields (flat: name, value, ...) are not a well-formed request's headers; undefined when they are. */
export function requestFault(fields: readonly string[]): string | undefined {
  let regular = false;
  let method: string | undefined;
  let scheme = false;
  let path: string | undefined;
  let authority = false;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    const why = badName(name) ?? badValue(name, value);
    if (why) return why;
    if (name.charCodeAt(0) === 0x3a) {
      if (regular) return `pseudo-header ${name} after a regular field (RFC 9113 §8.3)`;
      if (!REQUEST_PSEUDO.has(name))
        return name === ':status' ? ':status in a request (RFC 9113 §8.3.1)' : `unknown pseudo-header ${name} (RFC 9113 §8.3)`;
      if (name === ':method') {
        if (method !== undefined) return 'duplicate :method (RFC 9113 §8.3.1)';
        method = value;
      } else if (name === ':path') {
        if (path !== undefined) return 'duplicate :path (RFC 9113 §8.3.1)';
        path = value;
      } else if (name === ':scheme') {
        if (scheme) return 'duplicate :scheme (RFC 9113 §8.3.1)';
        scheme = true;
      } else {
        if (authority) return 'duplicate :authority (RFC 9113 §8.3.1)';
        authority = true;
      }
      continue;
    }
    regular = true;
    if (CONNECTION_SPECIFIC.has(name)) return `connection-specific field '${name}' (RFC 9113 §8.2.2)`;
    if (name === 'te' && value !== 'trailers') return `te: '${value}', only 'trailers' is allowed (RFC 9113 §8.2.2)`;
  }
  if (method === undefined) return 'no :method (RFC 9113 §8.3.1)';
  if (method === 'CONNECT')
    return scheme || path !== undefined || !authority ? 'CONNECT needs :authority and no :scheme or :path (RFC 9113 §8.5)' : undefined;
  if (!scheme) return 'no :scheme (RFC 9113 §8.3.1)';
  if (path === undefined || path === '') return 'no :path or an empty one (RFC 9113 §8.3.1)';
  return undefined;
}

/** Why the fields are not well-formed trailers (no pseudo-headers, RFC 9113 §8.1); undefined when they are. */
export function trailersFault(fields: readonly string[]): string | undefined {
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.charCodeAt(0) === 0x3a) return `pseudo-header ${name} in trailers (RFC 9113 §8.1)`;
    const why = badName(name) ?? badValue(name, fields[i + 1]!);
    if (why) return why;
    if (CONNECTION_SPECIFIC.has(name)) return `connection-specific field '${name}' (RFC 9113 §8.2.2)`;
  }
  return undefined;
}

/** The request's declared content-length (RFC 9113 §8.1.1): undefined when absent; NaN when not one non-negative integer. */
export function declaredLength(fields: readonly string[]): number | undefined {
  let out: number | undefined;
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] !== 'content-length') continue;
    const v = fields[i + 1]!;
    const n = /^\d{1,15}$/.test(v) ? Number(v) : NaN;
    if (out !== undefined && out !== n) return NaN;
    out = n;
  }
  return out;
}
