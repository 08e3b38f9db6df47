// JSON with integers kept exact: an integer literal past 2^53 becomes a
// bigint (INT64/UINT64 data, sequence ids and shm offsets survive as sent),
// everything else is what JSON.parse gives. The inference request reads its
// body with JSON.parse first and comes here only when a value that matters
// came out past 2^53 (mayHaveLostIntegers), so the FP32 path pays nothing.

/** Deepest nesting accepted: a tensor's rank is small; past this the body is refused (no stack overflow). */
export const MAX_JSON_DEPTH = 512;

/** Parse JSON text; integer literals outside the safe range come back as bigint. Throws SyntaxError. */
export function parseExactJson(text: string): unknown {
  return new ExactParser(text).document();
}

/**
 * Whether JSON.parse may have rounded an integer in `v` (a number, or an array
 * of them nested up to `depth`): every double at or past 2^53 is an integer,
 * and only an integer literal that large gives one.
 */
export function mayHaveLostIntegers(v: unknown, depth = 64): boolean {
  if (typeof v === 'number') return v > Number.MAX_SAFE_INTEGER || v < -Number.MAX_SAFE_INTEGER;
  if (!Array.isArray(v) || depth === 0) return false;
  for (let i = 0; i < v.length; i++) if (mayHaveLostIntegers(v[i], depth - 1)) return true;
  return false;
}

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);

/** A plain recursive-descent reader; only the rare bodies with long integers come here. */
class ExactParser {
  private i = 0;

  constructor(private readonly s: string) {}

  document(): unknown {
    const v = this.value(0);
    this.ws();
    if (this.i !== this.s.length) this.fail('Unexpected non-whitespace character after JSON');
    return v;
  }

  private fail(what: string): never {
    throw new SyntaxError(`${what} at position ${this.i}`);
  }

  private ws(): void {
    while (this.i < this.s.length && WS.has(this.s.charCodeAt(this.i))) this.i++;
  }

  private value(depth: number): unknown {
    this.ws();
    const c = this.s[this.i];
    if (c === '{' || c === '[') {
      if (depth >= MAX_JSON_DEPTH) this.fail(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
      return c === '{' ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === '"') return this.string();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
    for (const [word, v] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    }
    return this.fail(c === undefined ? 'Unexpected end of JSON input' : `Unexpected token '${c}'`);
  }

  private object(depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    this.i++;
    this.ws();
    if (this.s[this.i] === '}') {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail('Expected property name');
      const key = this.string();
      this.ws();
      if (this.s[this.i] !== ':') this.fail("Expected ':' after property name");
      this.i++;
      // defineProperty: a "__proto__" key is data, as with JSON.parse.
      Object.defineProperty(out, key, { value: this.value(depth), enumerable: true, writable: true, configurable: true });
      this.ws();
      const c = this.s[this.i++];
      if (c === '}') return out;
      if (c !== ',') this.fail("Expected ',' or '}' after property value");
    }
  }

  private array(depth: number): unknown[] {
    const out: unknown[] = [];
    this.i++;
    this.ws();
    if (this.s[this.i] === ']') {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth));
      this.ws();
      const c = this.s[this.i++];
      if (c === ']') return out;
      if (c !== ',') this.fail("Expected ',' or ']' after array element");
    }
  }

  /** A string literal: its text (escapes checked) handed to JSON.parse. */
  private string(): string {
    const start = this.i++;
    for (;;) {
      const c = this.s.charCodeAt(this.i);
      if (Number.isNaN(c)) this.fail('Unterminated string in JSON');
      if (c === 0x22) break;
      this.i += c === 0x5c ? 2 : 1;
    }
    this.i++;
    return JSON.parse(this.s.slice(start, this.i)) as string;
  }

  private number(): number | bigint {
    const m = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
    m.lastIndex = this.i;
    const r = m.exec(this.s);
    if (!r) this.fail('Invalid number');
    this.i = m.lastIndex;
    const text = r[0];
    if (r[1] === undefined && r[2] === undefined) {
      const n = Number(text);
      return Number.isSafeInteger(n) ? n : BigInt(text);
    }
    return Number(text);
  }
}
