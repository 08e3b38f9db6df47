// Which side of a canary rollout serves a call: a pure decision from the
// share, the client's pin header and the request id.
//
// - A pin (`X-Deploy-Side: stable|canary`) wins.
// - A request id the client chose (X-Request-Id, an async job's id) is
//   hashed with the rollout id into one of 10,000 buckets: the same id lands
//   on the same side on every gateway and every retry, for the whole step.
// - A call without a client id takes the next slot of a low-discrepancy
//   counter: after n such calls exactly floor(n × share) went to the canary
//   on this gateway, so the split over all gateways is exact too, where a
//   hash of fresh random ids would wander by √n.

export type Side = 'stable' | 'canary';

/** The header a client pins a side with. */
export const PIN_HEADER = 'x-deploy-side';

/** FNV-1a (32 bit) of a string's UTF-16 code units: cheap, stable across processes. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The bucket (0-9999) of a request id within a rollout. */
export function bucketOf(rolloutId: string, requestId: string): number {
  // A second round over the first hash spreads ids that differ only at the end.
  return fnv1a(`${fnv1a(requestId)}:${rolloutId}`) % 10_000;
}

/** A pin header's side, or undefined when absent or not one of the two names. */
export function pinnedSide(header: string | undefined): Side | undefined {
  if (header === undefined) return undefined;
  const v = header.trim().toLowerCase();
  return v === 'stable' || v === 'canary' ? v : undefined;
}

/** A per-gateway counter of unpinned, id-less calls for one step (the low-discrepancy split). */
export class SplitCounter {
  private n = 0;
  constructor(readonly share: number) {}
  /** The side of the next call: canary when floor((n+1)·s) passes floor(n·s). */
  next(): Side {
    const s = this.share / 100;
    const before = Math.floor(this.n * s + 1e-9);
    this.n++;
    return Math.floor(this.n * s + 1e-9) > before ? 'canary' : 'stable';
  }
}

/** The side of one call. `counter` is used only for calls without a client-chosen id. */
export function chooseSide(
  share: number,
  rolloutId: string,
  pin: Side | undefined,
  clientId: string | undefined,
  counter: SplitCounter,
): Side {
  if (pin) return pin;
  if (share <= 0) return 'stable';
  if (share >= 100) return 'canary';
  if (clientId !== undefined) return bucketOf(rolloutId, clientId) < share * 100 ? 'canary' : 'stable';
  return counter.next();
}
