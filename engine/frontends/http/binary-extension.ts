// Triton's binary tensor data extension: a body is a JSON header of
// `Inference-Header-Content-Length` bytes followed by the inputs' raw bytes in
// input order; responses append binary outputs after the JSON the same way.
// Pure functions over Buffers; input slices are views (no copies).
import { invalidArg } from '../../api/status.ts';

export const HEADER_LENGTH = 'Inference-Header-Content-Length';

/** Split a request body into its JSON header and binary tail. */
export function splitBody(body: Buffer, headerLength: string | undefined): { json: Buffer; binary: Buffer } {
  if (headerLength === undefined || headerLength === '') return { json: body, binary: body.subarray(body.length) };
  const n = Number(headerLength);
  if (!/^\d+$/.test(headerLength.trim()) || !Number.isSafeInteger(n)) {
    throw invalidArg(`${HEADER_LENGTH} must be a non-negative integer, got '${headerLength}'`);
  }
  if (n > body.length) {
    throw invalidArg(`${HEADER_LENGTH} ${n} exceeds the request body size ${body.length}`);
  }
  return { json: body.subarray(0, n), binary: body.subarray(n) };
}

/** Hands out consecutive slices of the binary tail, one per binary input. */
export class BinaryInputReader {
  private offset = 0;
  constructor(private readonly binary: Buffer) {}

  /** The next `size` bytes, for the input named `tensor`. */
  take(tensor: string, size: number): Uint8Array {
    if (!Number.isSafeInteger(size) || size < 0) {
      throw invalidArg(`'binary_data_size' of input '${tensor}' must be a non-negative integer`);
    }
    if (this.offset + size > this.binary.length) {
      throw invalidArg(
        `input '${tensor}' declares binary_data_size ${size} but only ${this.binary.length - this.offset} bytes of binary data remain in the request body`,
      );
    }
    const out = this.binary.subarray(this.offset, this.offset + size);
    this.offset += size;
    return out;
  }

  /** Throws when bytes were sent that no input claimed. */
  finish(): void {
    const extra = this.binary.length - this.offset;
    if (extra > 0) throw invalidArg(`${extra} bytes of binary data in the request body are not claimed by any input`);
  }
}

/**
 * Assemble a response body. Without binary outputs it is the JSON alone;
 * otherwise the JSON header followed by the outputs' bytes, and the header's
 * length to send as Inference-Header-Content-Length.
 */
export function assembleBody(json: string, binaries: Uint8Array[]): { body: Buffer; headerLength?: number } {
  const head = Buffer.from(json, 'utf8');
  if (binaries.length === 0) return { body: head };
  let total = head.length;
  for (const b of binaries) total += b.byteLength;
  const body = Buffer.allocUnsafe(total);
  head.copy(body, 0);
  let o = head.length;
  for (const b of binaries) {
    body.set(b, o);
    o += b.byteLength;
  }
  return { body, headerLength: head.length };
}
