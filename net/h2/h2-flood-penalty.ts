// The reconnect penalty of the own HTTP/2 front (h2-limits.ts:
// `flood-penalty-ms`, `flood-penalty-max-ms`). The per-connection bounds cut
// a flood within milliseconds, but an attacker that reconnects at once gets
// a fresh budget each time (222 rapid-reset rounds in 3 s in the attack
// suite), so the engine still spends a core on it. A connection cut for a
// flood (GOAWAY ENHANCE_YOUR_CALM, or dropped for not reading) strikes its
// peer's address; a new connection from a struck address is not read, and
// gets no SETTINGS, until `base × 2^(strikes − 1)` (at most `max`) after the
// last strike. Connections already open are never touched, so a client that
// shares the address keeps its calls going. An address is forgotten after
// FORGET_MS without a strike, and the table holds at most `maxAddresses`
// (the oldest strike goes first), so a peer with many addresses cannot grow
// it without bound.

/** An address with no strike for this long starts again from no strike. */
export const FORGET_MS = 60_000;
/** Addresses kept at most. */
export const MAX_STRUCK_ADDRESSES = 4096;

interface Strikes {
  n: number;
  last: number;
}

export class FloodPenalty {
  /** Insertion order is the order of the last strike: the first key is the stalest. */
  private readonly struck = new Map<string, Strikes>();

  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
    private readonly maxAddresses = MAX_STRUCK_ADDRESSES,
  ) {}

  /** A connection from `addr` was cut for a flood at `now` (ms). */
  strike(addr: string | undefined, now: number): void {
    if (!addr || this.baseMs <= 0) return;
    const s = this.struck.get(addr);
    const n = s && now - s.last < FORGET_MS ? s.n + 1 : 1;
    this.struck.delete(addr);
    this.struck.set(addr, { n, last: now });
    if (this.struck.size > this.maxAddresses) this.struck.delete(this.struck.keys().next().value!);
  }

  /** How long a connection from `addr` arriving at `now` waits before it is read; 0: at once. */
  delayMs(addr: string | undefined, now: number): number {
    const s = addr === undefined ? undefined : this.struck.get(addr);
    if (!s) return 0;
    if (now - s.last >= FORGET_MS) {
      this.struck.delete(addr!);
      return 0;
    }
    const wait = Math.min(this.maxMs, this.baseMs * 2 ** Math.min(s.n - 1, 30));
    return Math.max(0, s.last + wait - now);
  }

  /** Addresses held (for tests). */
  get size(): number {
    return this.struck.size;
  }
}
