// gRPC's length-prefixed messages (gRPC over HTTP/2: a 1-byte compressed
// flag, a 4-byte big-endian length, then the message), read and written in
// one place for every path that frames gRPC itself: the engine's direct
// ModelInfer, the client's direct unary call, and the engine's receive-pool
// decoder inside grpc-js (engine/frontends/grpc/grpc-js-internals.ts).
//
// Reading: MessageReader assembles messages from DATA chunks of any size. A
// message that lies whole inside one chunk can be used in place (a view, no
// copy) where the owner allows it; otherwise it is copied once into a buffer
// from the owner's allocator (the engine passes its receive pool). The hot
// path allocates nothing beyond that buffer: the 5-byte prefix is read
// straight from the chunk unless it is itself split across chunks. A message
// declared over GROW_FROM bytes is not reserved at its declared size (up to
// 2 GiB, before a byte of it came): its buffer starts at GROW_FROM and doubles
// as the bytes arrive, so a client that declares much and sends little holds
// little (issue 41).
//
// Writing: endWithMessage sends the prefix and the message as one corked
// write, so the message is never copied behind its prefix.
import type { Writable } from 'node:stream';

/** The prefix's length: compressed flag + uint32 BE length. */
export const PREFIX_BYTES = 5;

/** The 5-byte prefix of an uncompressed message of `length` bytes. */
export function messagePrefix(length: number): Buffer {
  const p = Buffer.allocUnsafe(PREFIX_BYTES);
  p[0] = 0;
  p.writeUInt32BE(length, 1);
  return p;
}

/**
 * Send one uncompressed message and end the stream's sending side: `prefix`
 * (from messagePrefix; reusable across attempts) and the message corked into
 * one write (end() uncorks), so the message is not copied behind its prefix.
 */
export function endWithMessage(stream: Writable, prefix: Buffer, message: Uint8Array): void {
  stream.cork();
  stream.write(prefix);
  stream.end(message);
}

/** Messages declared up to this size get their whole buffer at once; larger ones grow with their bytes. */
export const GROW_FROM = 1 << 20;

/** write() took the chunk (whole messages went to onMessage; a part waits for the next chunk). */
export const READ_OK = 0;
/** A message declared more than the reader's limit (its length is in `oversize`); the stream is unusable. */
export const READ_TOO_LARGE = 1;
/** Bytes came after a message where the owner wanted no more (onMessage said stop). */
export const READ_EXTRA = 2;
export type ReadResult = typeof READ_OK | typeof READ_TOO_LARGE | typeof READ_EXTRA;

/**
 * Assembles length-prefixed messages from chunks; each whole one (prefix
 * included) goes to onMessage. Owns its partial message; single-threaded.
 */
export abstract class MessageReader {
  /** A prefix split across chunks (allocated only then). */
  private head: Buffer | undefined;
  private headAt = 0;
  /** The message being assembled (possibly only its first part, see `want`), and how much of it has arrived. */
  private buf: Buffer | undefined;
  private at = 0;
  /** The whole message's bytes (prefix included) while `buf` is smaller and grows. */
  private want = 0;
  /** The declared length of the message over the limit, after READ_TOO_LARGE. */
  oversize = 0;

  constructor(
    /** Largest message accepted, in bytes (-1: no limit). */
    private readonly maxBytes: number,
    /** Where a message that must be assembled is copied to: exactly `bytes` long. */
    private readonly alloc: (bytes: number) => Buffer,
    /** Hand out a message lying whole in one chunk as a view of that chunk (no copy). */
    private readonly inPlace: boolean,
  ) {}

  /**
   * A whole message (prefix included); `inPlace` when it is a view of a
   * received chunk rather than a buffer from the allocator. False stops the
   * reading of this chunk.
   */
  protected abstract onMessage(message: Buffer, inPlace: boolean): boolean;

  /** True while part of a message (or of its prefix) has arrived but not the rest. */
  get partial(): boolean {
    return this.headAt > 0 || this.buf !== undefined;
  }

  /** Take one chunk. */
  write(chunk: Buffer): ReadResult {
    const n = chunk.length;
    let o = 0;
    while (o < n) {
      let buf = this.buf;
      if (buf === undefined) {
        let size: number;
        if (this.headAt === 0 && n - o >= PREFIX_BYTES) {
          // The prefix is whole in this chunk: read it in place.
          size = chunk.readUInt32BE(o + 1);
          if (this.maxBytes !== -1 && size > this.maxBytes) return this.tooLarge(size);
          const end = o + PREFIX_BYTES + size;
          if (this.inPlace && end <= n) {
            const more = this.onMessage(o === 0 && end === n ? chunk : chunk.subarray(o, end), true);
            o = end;
            if (!more) return o < n ? READ_EXTRA : READ_OK;
            continue;
          }
          buf = this.start(PREFIX_BYTES + size, n - o);
          chunk.copy(buf, 0, o, o + PREFIX_BYTES);
          o += PREFIX_BYTES;
        } else {
          const head = (this.head ??= Buffer.allocUnsafe(PREFIX_BYTES));
          const k = Math.min(PREFIX_BYTES - this.headAt, n - o);
          chunk.copy(head, this.headAt, o, o + k);
          this.headAt += k;
          o += k;
          if (this.headAt < PREFIX_BYTES) return READ_OK;
          this.headAt = 0;
          size = head.readUInt32BE(1);
          if (this.maxBytes !== -1 && size > this.maxBytes) return this.tooLarge(size);
          buf = this.start(PREFIX_BYTES + size, n - o);
          head.copy(buf, 0);
        }
        this.buf = buf;
        this.at = PREFIX_BYTES;
      }
      if (this.want > buf.length && this.at + (n - o) > buf.length) buf = this.grow(buf, n - o);
      const k = Math.min(n - o, buf.length - this.at);
      chunk.copy(buf, this.at, o, o + k);
      this.at += k;
      o += k;
      if (this.at < buf.length || buf.length < this.want) return READ_OK;
      this.buf = undefined;
      if (!this.onMessage(buf, false)) return o < n ? READ_EXTRA : READ_OK;
    }
    return READ_OK;
  }

  /** The buffer for a message of `bytes` (prefix included), `inHand` of them in the current chunk: whole, or a first part. */
  private start(bytes: number, inHand: number): Buffer {
    if (bytes <= GROW_FROM) {
      this.want = 0;
      return this.alloc(bytes);
    }
    this.want = bytes;
    const first = Math.min(bytes, Math.max(GROW_FROM, 2 * inHand));
    return first === bytes ? this.alloc(bytes) : Buffer.allocUnsafeSlow(first);
  }

  /** A larger buffer for the message in progress, with what has arrived copied over: doubled, or whole once the rest fits. */
  private grow(buf: Buffer, inHand: number): Buffer {
    const size = Math.min(this.want, Math.max(2 * buf.length, this.at + inHand));
    const next = size === this.want ? this.alloc(size) : Buffer.allocUnsafeSlow(size);
    buf.copy(next, 0, 0, this.at);
    this.buf = next;
    return next;
  }

  private tooLarge(size: number): ReadResult {
    this.oversize = size;
    return READ_TOO_LARGE;
  }
}

/**
 * The one message of a unary call (a request on the server, an answer on the
 * client): anything after it is READ_EXTRA. A message whole in one chunk is
 * used in place.
 */
export class UnaryMessageReader extends MessageReader {
  /** The message (prefix included) once whole. */
  message: Buffer | undefined;
  /** Whether `message` is a view of a received chunk (else it came from the allocator). */
  messageInPlace = false;

  constructor(maxBytes: number, alloc: (bytes: number) => Buffer) {
    super(maxBytes, alloc, true);
  }

  override write(chunk: Buffer): ReadResult {
    return this.message === undefined ? super.write(chunk) : READ_EXTRA;
  }

  protected onMessage(message: Buffer, inPlace: boolean): boolean {
    this.message = message;
    this.messageInPlace = inPlace;
    return false;
  }
}
