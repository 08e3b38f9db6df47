// The grpc-timeout header (gRPC over HTTP/2: TimeoutValue of at most 8
// digits, then a unit H M S m u n), read and written once for the direct
// paths. Parsing follows grpc-js's server exactly (the same pattern, not
// anchored, and the same truncation to whole ms), so the engine's direct
// ModelInfer accepts and refuses what grpc-js does; formatting follows
// grpc-js's client (the smallest unit that keeps 8 digits, rounded up).

// grpc-js's pattern, as it is (server-interceptors.ts).
const PATTERN = /(\d{1,8})\s*([HMSmun])/;
const UNIT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

/**
 * The timeout in whole ms (0 for less than 1 ms), or undefined when `value`
 * is not a grpc-timeout. Like grpc-js, the ms are cut to 32 bits: a timeout
 * beyond ~24.8 days wraps (and then expires at once, as it does in grpc-js).
 */
export function parseGrpcTimeout(value: string): number | undefined {
  const m = PATTERN.exec(value);
  return m ? (Number(m[1]) * UNIT_MS[m[2]!]!) | 0 : undefined;
}

const UNITS: ReadonlyArray<readonly [string, number]> = [
  ['m', 1],
  ['S', 1000],
  ['M', 60_000],
  ['H', 3_600_000],
];

/** The header value for `ms` from now (at least 1 ms). */
export function formatGrpcTimeout(ms: number): string {
  const t = Math.max(1, ms);
  if (t < 1e8) return `${Math.ceil(t)}m`; // the common case, no search
  for (const [unit, factor] of UNITS) {
    const amount = t / factor;
    if (amount < 1e8) return `${Math.ceil(amount)}${unit}`;
  }
  return '99999999H';
}
