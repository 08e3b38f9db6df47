// Writes of the local channel (local-channel.ts), coalesced: frames queued
// while the event loop runs one phase (every call that HTTP connections,
// a batch's answers or a socket read produced) leave in one write at the
// next setImmediate, so many calls in flight cost one syscall. Small frames
// are joined into one Buffer; a large piece is written as it is (corked with
// the rest into one writev), never copied.
//
// Ownership: one writer per socket; event loop only.
import type { Socket } from 'node:net';

/** Below this many queued bytes the pieces are joined into one Buffer (a copy cheaper than a writev entry each). */
const JOIN_BELOW = 64 * 1024;

export class LocalFrameWriter {
  private pieces: Uint8Array[] = [];
  private bytes = 0;
  private scheduled: NodeJS.Immediate | undefined;

  constructor(private readonly socket: Socket) {}

  /** Bytes queued and not yet handed to the socket (its writableLength counts those handed). */
  get queued(): number {
    return this.bytes;
  }

  /** Queue `piece` (a whole frame, or the next part of one); it is written at the next flush. */
  push(piece: Uint8Array): void {
    this.pieces.push(piece);
    this.bytes += piece.length;
    this.scheduled ??= setImmediate(() => this.flush());
  }

  /** Write what is queued now. */
  flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const pieces = this.pieces;
    if (!pieces.length) return;
    const bytes = this.bytes;
    this.pieces = [];
    this.bytes = 0;
    const s = this.socket;
    if (s.destroyed || !s.writable) return;
    if (pieces.length === 1) s.write(pieces[0]!);
    else if (bytes < JOIN_BELOW) s.write(Buffer.concat(pieces, bytes));
    else {
      s.cork();
      for (const p of pieces) s.write(p);
      s.uncork();
    }
  }

  /** Drop what is queued (the socket is going away). */
  discard(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    this.pieces = [];
    this.bytes = 0;
  }
}
