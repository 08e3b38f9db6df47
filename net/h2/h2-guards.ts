// Small pieces of state the engine's own HTTP/2 server (h2-connection.ts)
// keeps per connection to answer a hostile or confused peer as RFC 9113 says
// without unbounded memory: a token bucket for stream resets (the "rapid
// reset" attack class, CVE-2023-44487) and a bounded memory of how recent
// streams closed (RFC 9113 §5.1 answers a frame on a closed stream by how it
// closed).

/** A token bucket: `burst` tokens, `perSecond` added back; `now` injected (ms). */
export class ResetBudget {
  private tokens: number;
  private last: number;

  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  /** Spend one token; false when none is left. */
  take(now: number): boolean {
    const add = ((now - this.last) * this.perSecond) / 1000;
    if (add >= 1) {
      this.tokens = Math.min(this.burst, this.tokens + Math.floor(add));
      this.last = now;
    }
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}

/** How a stream closed: we reset it, the peer reset it, or the peer had ended its side (END_STREAM). */
export type ClosedHow = 'we-reset' | 'peer-reset' | 'peer-ended';

/** The last `size` closed streams and how each closed (older ones are forgotten, oldest first). */
export class ClosedStreams {
  private readonly how = new Map<number, ClosedHow>();

  constructor(private readonly size = 256) {}

  add(id: number, how: ClosedHow): void {
    this.how.set(id, how);
    if (this.how.size > this.size) this.how.delete(this.how.keys().next().value!);
  }

  get(id: number): ClosedHow | undefined {
    return this.how.get(id);
  }
}
