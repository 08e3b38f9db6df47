// grpc-js assembles each received message with Buffer.concat of its HTTP/2
// DATA chunks: a fresh ArrayBuffer per message. For tensors sent inline that
// is a fresh 588 KiB (encoder) to 10 MiB buffer per request, and V8 pays for
// it in full mark-compacts (see engine/frontends/grpc/receive-pool.ts). This module swaps
// grpc-js's StreamDecoder.write for one that copies the chunks of a large
// message straight into a buffer from the receive pool (one copy, as
// before, but no new ArrayBuffer once the pool is warm). Small messages are
// assembled exactly as grpc-js does.
//
// grpc-js offers no hook for this, so it is a patch of one internal class,
// applied once per process by the engine's gRPC server. It checks the
// class's shape first and leaves grpc-js alone (logging why) when a new
// grpc-js version changed it; behaviour is then what grpc-js does itself.
// Buffers handed out here are released only by the ModelInfer handler
// (grpc-server.ts); any other message's buffer is garbage collected.
import { createRequire } from 'node:module';
import path from 'node:path';
import { POOLED_MIN_BYTES, take } from './receive-pool.ts';
import { log } from '../../../common/logger.ts';

interface DecoderState {
  maxReadMessageLength: number;
  readState: number;
  readCompressFlag: Buffer;
  readPartialSize: Buffer;
  readSizeRemaining: number;
  readMessageSize: number;
  readPartialMessage: Buffer[];
  readMessageRemaining: number;
  /** Ours: the pooled buffer a large message is copied into (header included), and the write offset. */
  pooled?: Buffer;
  pooledAt?: number;
}

// grpc-js's ReadState values.
const NO_DATA = 0;
const READING_SIZE = 1;
const READING_MESSAGE = 2;

/** grpc-js's StreamDecoder.write, with large messages copied into pooled buffers. */
function write(this: DecoderState, data: Buffer): Buffer[] {
  let head = 0;
  const result: Buffer[] = [];
  while (head < data.length) {
    switch (this.readState) {
      case NO_DATA:
        this.readCompressFlag = data.subarray(head, head + 1);
        head += 1;
        this.readState = READING_SIZE;
        this.readPartialSize.fill(0);
        this.readSizeRemaining = 4;
        this.readMessageSize = 0;
        this.readMessageRemaining = 0;
        this.readPartialMessage = [];
        this.pooled = undefined;
        break;
      case READING_SIZE: {
        const n = Math.min(data.length - head, this.readSizeRemaining);
        data.copy(this.readPartialSize, 4 - this.readSizeRemaining, head, head + n);
        this.readSizeRemaining -= n;
        head += n;
        if (this.readSizeRemaining > 0) break;
        this.readMessageSize = this.readPartialSize.readUInt32BE(0);
        if (this.maxReadMessageLength !== -1 && this.readMessageSize > this.maxReadMessageLength) {
          throw new Error(`Received message larger than max (${this.readMessageSize} vs ${this.maxReadMessageLength})`);
        }
        this.readMessageRemaining = this.readMessageSize;
        if (this.readMessageRemaining === 0) {
          result.push(Buffer.concat([this.readCompressFlag, this.readPartialSize], 5));
          this.readState = NO_DATA;
          break;
        }
        this.readState = READING_MESSAGE;
        if (this.readMessageSize + 5 >= POOLED_MIN_BYTES) {
          const buf = take(this.readMessageSize + 5);
          buf[0] = this.readCompressFlag[0]!;
          this.readPartialSize.copy(buf, 1);
          this.pooled = buf;
          this.pooledAt = 5;
        }
        break;
      }
      case READING_MESSAGE: {
        const n = Math.min(data.length - head, this.readMessageRemaining);
        if (this.pooled) {
          data.copy(this.pooled, this.pooledAt, head, head + n);
          this.pooledAt! += n;
        } else this.readPartialMessage.push(data.subarray(head, head + n));
        this.readMessageRemaining -= n;
        head += n;
        if (this.readMessageRemaining > 0) break;
        if (this.pooled) result.push(this.pooled);
        else result.push(Buffer.concat([this.readCompressFlag, this.readPartialSize, ...this.readPartialMessage], this.readMessageSize + 5));
        this.pooled = undefined;
        this.readPartialMessage = [];
        this.readState = NO_DATA;
        break;
      }
      default:
        throw new Error('Unexpected read state');
    }
  }
  return result;
}

let installed: boolean | undefined;

/** Install the pooled decoder into grpc-js (once per process); false when grpc-js's decoder is not the shape this was written for. */
export function installPooledDecoder(): boolean {
  if (installed !== undefined) return installed;
  installed = false;
  try {
    const require = createRequire(import.meta.url);
    const main = require.resolve('@grpc/grpc-js');
    const mod = require(path.join(path.dirname(main), 'stream-decoder.js')) as { StreamDecoder?: new (max: number) => object };
    const D = mod.StreamDecoder;
    const probe = D ? (new D(100) as Partial<DecoderState>) : undefined;
    const fields: Array<keyof DecoderState> = ['readState', 'readCompressFlag', 'readPartialSize', 'readSizeRemaining', 'readMessageSize', 'readPartialMessage', 'readMessageRemaining', 'maxReadMessageLength'];
    if (!D || typeof D.prototype.write !== 'function' || !probe || !fields.every((f) => f in probe) || probe.readState !== NO_DATA) {
      log.info('grpc-js StreamDecoder has changed shape: large gRPC messages are assembled by grpc-js itself (no receive pool)');
      return false;
    }
    D.prototype.write = write as never;
    installed = true;
  } catch (err) {
    log.info(`grpc-js StreamDecoder not found (${(err as Error).message}): no receive pool for gRPC`);
  }
  return installed;
}
