// The headers timeout of one HTTP/1.1 connection (http1-connection.ts), as
// node:http counts it: from the connection's start for its first head, and
// from the first byte of a head queued behind a request in progress or behind
// replies the client has not read, until the head's end (a blank line) is
// there. One end of head found is enough; the one after it is timed once its
// own turn comes.

/** Counts headersMs for the head being waited for; `onLate` runs once when it is late. */
export class HeadClock {
  private timer: NodeJS.Timeout | undefined;
  /** The buffer up to here holds no end of the queued head (the next scan starts just before it). */
  private scanned = 0;
  private readonly fire = () => {
    this.timer = undefined;
    this.onLate();
  };

  constructor(
    private readonly ms: number,
    private readonly onLate: () => void,
  ) {}

  /** Starts counting now unless it already counts (a connection's first head). */
  start(): void {
    this.timer ??= setTimeout(this.fire, this.ms);
  }

  /** Times the head that starts at `from` in `pending`, or stops timing when its end is there or nothing is. */
  watch(pending: Buffer, from: number): void {
    if (pending.length <= from) return this.clear();
    const start = Math.max(from, this.scanned - 3);
    // CRLF CRLF, or the LF-only ends node:http's parser also takes: any of them ends the head for this purpose.
    if (pending.indexOf('\n\r\n', start, 'latin1') >= 0 || pending.indexOf('\n\n', start, 'latin1') >= 0) return this.clear();
    this.scanned = pending.length;
    this.start();
  }

  /** The buffer changed under the scan (a request was taken off it): scan from the start next time. */
  rescan(): void {
    this.scanned = 0;
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
