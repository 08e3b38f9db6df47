// GATEWAY_ENGINE_KEY, what a restricted engine wants from the gateway: parsed
// once here, sent as gRPC metadata on every engine call and as HTTP headers on
// the console's read of the engine's HTTP index (engine-client.ts).

/**
 * The key/value pairs of GATEWAY_ENGINE_KEY = `<key>=<value>[,<key>=<value>...]` (keys lower
 * case): what a restricted engine wants. `npm start` sets it (scripts/start-args.ts); unset,
 * none is sent (a plain Triton). Errors name the variable but never echo its value.
 */
export function engineKeyPairs(value: string | undefined): Record<string, string> | undefined {
  if (!value) return undefined;
  const pairs: Record<string, string> = {};
  for (const pair of value.split(',')) {
    const eq = pair.indexOf('=');
    const key = pair.slice(0, eq).trim().toLowerCase();
    if (eq <= 0 || eq === pair.length - 1 || !/^[0-9a-z._-]+$/.test(key)) {
      throw new Error(
        "GATEWAY_ENGINE_KEY: expected <key>=<value>[,<key>=<value>...] (the header and value of the engine's --grpc-restricted-protocol)",
      );
    }
    pairs[key] = pair.slice(eq + 1);
  }
  return pairs;
}

/** The pairs as gRPC metadata (Triton's --grpc-restricted-protocol reads `triton-grpc-protocol-<key>`). */
export function engineKeyMetadata(value: string | undefined): Record<string, string> | undefined {
  const pairs = engineKeyPairs(value);
  return pairs && Object.fromEntries(Object.entries(pairs).map(([k, v]) => [`triton-grpc-protocol-${k}`, v]));
}
