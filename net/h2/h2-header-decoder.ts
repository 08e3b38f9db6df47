// HPACK decoding of received header blocks (RFC 7541) for the engine's own
// HTTP/2 server (h2-connection.ts), by hpack.js (the decoder `spdy` uses:
// dynamic table, Huffman strings), one decoder per connection, every block in
// order. hpack.js is bounded from around it, field by field, while it
// decodes: the field count and the header list size (RFC 9113 §6.5.2: name +
// value + 32 per field) are checked before a field is kept, so a small block
// that names a large table entry many times costs neither memory nor a
// quadratic merge; past a bound the rest of the block is still decoded (the
// table must stay in step with the client's) but nothing more is kept. A
// dynamic table size update after a field, or above our
// SETTINGS_HEADER_TABLE_SIZE, is a decoding error (RFC 7541 §4.2, §6.3).
import { createRequire } from 'node:module';
import type { H2Headers } from './h2-stream.ts';

interface HpackDecompressor {
  write(b: Buffer): void;
  execute(): void;
  on(ev: 'error', f: (e: Error) => void): void;
  push(h: { name: string; value: string } | null): boolean;
  updateTableSize(size: number): void;
  _processUpdate(): void;
  _decoder: { decodeInt(): number };
}
const hpack = createRequire(import.meta.url)('hpack.js') as {
  decompressor: { create(o: { table: { maxSize: number } }): HpackDecompressor };
};

/** SETTINGS_HEADER_TABLE_SIZE: we advertise the default. */
export const HEADER_TABLE_SIZE = 4096;
/** RFC 9113 §6.5.2: each field counts 32 bytes beyond its name and value. */
const FIELD_OVERHEAD = 32;

/** One decoded block: names and values in order (flat: name, value, name, value, ...). */
export interface DecodedBlock {
  fields: string[];
  /** Set when a bound was passed: the fields past it were decoded and dropped. */
  over?: string;
}

/** A connection's HPACK decoding state: every header block must pass through it, in order. */
export class HeaderDecoder {
  private readonly d = hpack.decompressor.create({ table: { maxSize: HEADER_TABLE_SIZE } });
  /** Why the last decode failed. */
  error = '';
  private fields: string[] = [];
  private listBytes = 0;
  private over: string | undefined;

  constructor(
    private readonly maxListBytes: number,
    private readonly maxFields: number,
  ) {
    const d = this.d;
    d.on('error', (e) => (this.error = e.message || 'undecodable'));
    // hpack.js pushes each decoded field into a readable stream; we take them here instead.
    d.push = (h) => {
      if (h) this.take(h.name, h.value);
      return true;
    };
    d._processUpdate = () => {
      const size = d._decoder.decodeInt();
      if (this.fields.length > 0 || this.over) throw new Error('dynamic table size update after a header field (RFC 7541 §4.2)');
      if (size > HEADER_TABLE_SIZE)
        throw new Error(`dynamic table size update to ${size}, above SETTINGS_HEADER_TABLE_SIZE ${HEADER_TABLE_SIZE}`);
      d.updateTableSize(size);
    };
  }

  private take(name: string, value: string): void {
    if (this.over) return;
    this.listBytes += name.length + value.length + FIELD_OVERHEAD;
    if (this.fields.length >= 2 * this.maxFields) this.over = `more than ${this.maxFields} header fields`;
    else if (this.listBytes > this.maxListBytes) this.over = `header list over ${this.maxListBytes} bytes`;
    else this.fields.push(name, value);
  }

  /** The block's fields; undefined when it does not decode (a COMPRESSION_ERROR: `error` says why). */
  decode(block: Buffer): DecodedBlock | undefined {
    this.error = '';
    this.fields = [];
    this.listBytes = 0;
    this.over = undefined;
    if (block.length) {
      this.d.write(block);
      this.d.execute();
    }
    if (this.error) return undefined;
    return this.over ? { fields: this.fields, over: this.over } : { fields: this.fields };
  }
}

/** Fields as node:http2 gives them: repeated names in an array, in order (linear in the field count). */
export function toHeaders(fields: readonly string[]): H2Headers {
  const out = Object.create(null) as H2Headers; // no prototype: a field named __proto__ is a field
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    const prev = out[name];
    if (prev === undefined) out[name] = value;
    else if (Array.isArray(prev)) prev.push(value);
    else out[name] = [prev, value];
  }
  return out;
}
