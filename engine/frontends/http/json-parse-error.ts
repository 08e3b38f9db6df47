// Why a request body is not JSON, in the words and byte offset of rapidjson,
// which Triton's HTTP server parses with (TritonJson: "failed to parse the
// request JSON buffer: <GetParseError_En> at <offset>"). Clients and
// Triton's QA match on that text, so the engine reports the same. Runs only
// after JSON.parse has failed: a scan over the bytes with rapidjson's
// default rules, stopping at the first error.

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);
const isDigit = (c: number | undefined) => c !== undefined && c >= 0x30 && c <= 0x39;

class Failure {
  constructor(
    readonly message: string,
    readonly offset: number,
  ) {}
}

/** rapidjson's message and offset for the first error in `bytes`, or undefined when it parses. */
export function rapidJsonError(bytes: Uint8Array): { message: string; offset: number } | undefined {
  try {
    new Scan(bytes).root();
    return undefined;
  } catch (e) {
    if (e instanceof Failure) return { message: e.message, offset: e.offset };
    throw e;
  }
}

const OBJECT = 0x7b; // {
const ARRAY = 0x5b; // [
const closer = (container: number): number => (container === OBJECT ? 0x7d : 0x5d);

/**
 * A cursor over the bytes with one method per rule of rapidjson's reader (root, value, string, number,
 * literal, member name); each throws a Failure at rapidjson's offset for the first error it meets.
 */
class Scan {
  private i = 0;

  constructor(private readonly bytes: Uint8Array) {}

  /** The whole body: one value with optional whitespace around it. */
  root(): void {
    this.ws();
    if (this.i >= this.bytes.length) this.fail('The document is empty.');
    this.document();
    this.ws();
    if (this.i < this.bytes.length) this.fail('The document root must not be followed by other values.');
  }

  private fail(message: string, at = this.i): never {
    throw new Failure(message, at);
  }

  private ws(): void {
    while (this.i < this.bytes.length && WS.has(this.bytes[this.i]!)) this.i++;
  }

  /** One value and everything nested in it: a loop with an explicit stack of open containers, so no body can overflow the call stack. */
  private document(): void {
    const open: number[] = [];
    let wantValue = true;
    for (;;) {
      if (wantValue) {
        this.ws();
        const c = this.bytes[this.i];
        if (c === OBJECT || c === ARRAY) {
          wantValue = this.openContainer(open, c);
          continue;
        }
        this.scalar(c);
      }
      if (!open.length) return;
      wantValue = this.afterElement(open);
    }
  }

  /** Past `{` or `[`: true when a value (or member) follows, false when the container closed at once. */
  private openContainer(open: number[], c: number): boolean {
    open.push(c);
    this.i++;
    this.ws();
    if (this.bytes[this.i] === closer(c)) {
      open.pop();
      this.i++;
      return false;
    }
    if (c === OBJECT) this.name();
    return true;
  }

  /** After an element of the innermost open container: a comma (true: another value follows) or its closer (false). */
  private afterElement(open: number[]): boolean {
    this.ws();
    const top = open[open.length - 1]!;
    if (this.bytes[this.i] === 0x2c) {
      this.i++;
      this.ws();
      if (top === OBJECT) this.name();
      return true;
    }
    if (this.bytes[this.i] !== closer(top)) {
      this.fail(top === OBJECT ? "Missing a comma or '}' after an object member." : "Missing a comma or ']' after an array element.");
    }
    open.pop();
    this.i++;
    return false;
  }

  private scalar(c: number | undefined): void {
    if (c === 0x6e) this.literal('null');
    else if (c === 0x74) this.literal('true');
    else if (c === 0x66) this.literal('false');
    else if (c === 0x22) this.string();
    else this.number();
  }

  private literal(word: string): void {
    for (let k = 1; k < word.length; k++) if (this.bytes[++this.i] !== word.charCodeAt(k)) this.fail('Invalid value.');
    this.i++;
  }

  /** An object member's name and its colon. */
  private name(): void {
    if (this.bytes[this.i] !== 0x22) this.fail('Missing a name for object member.');
    this.string();
    this.ws();
    if (this.bytes[this.i] !== 0x3a) this.fail('Missing a colon after a name of object member.');
    this.i++;
  }

  private string(): void {
    const bytes = this.bytes;
    this.i++; // the opening quote
    for (;;) {
      const c = bytes[this.i];
      if (c === undefined || c === 0) this.fail('Missing a closing quotation mark in string.');
      if (c === 0x22) return void this.i++;
      if (c === 0x5c) this.escape();
      else if (c! < 0x20) this.fail('Invalid encoding in string.');
      else this.i++;
    }
  }

  /** A backslash escape in a string; rapidjson reports a bad one at its backslash. */
  private escape(): void {
    const bytes = this.bytes;
    const e = bytes[this.i + 1];
    if (e === 0x75) {
      for (let k = 2; k < 6; k++)
        if (!/[0-9a-fA-F]/.test(String.fromCharCode(bytes[this.i + k] ?? 0))) this.fail('Incorrect hex digit after \\u escape in string.');
      this.i += 6;
    } else if (e !== undefined && '"\\/bfnrt'.includes(String.fromCharCode(e))) this.i += 2;
    else this.fail('Invalid escape character in string.');
  }

  private number(): void {
    const bytes = this.bytes;
    const start = this.i;
    if (bytes[this.i] === 0x2d) this.i++;
    if (!isDigit(bytes[this.i])) this.fail('Invalid value.', start);
    if (bytes[this.i] === 0x30) this.i++;
    else this.digits();
    if (bytes[this.i] === 0x2e) {
      this.i++;
      if (!isDigit(bytes[this.i])) this.fail('Missing fraction part in number.');
      this.digits();
    }
    if (bytes[this.i] === 0x65 || bytes[this.i] === 0x45) {
      this.i++;
      if (bytes[this.i] === 0x2b || bytes[this.i] === 0x2d) this.i++;
      if (!isDigit(bytes[this.i])) this.fail('Missing exponent in number.');
      this.digits();
    }
    const text = Buffer.from(bytes.subarray(start, this.i)).toString('latin1');
    if (!Number.isFinite(Number(text))) this.fail('Number too big to be stored in double.', start);
  }

  private digits(): void {
    while (isDigit(this.bytes[this.i])) this.i++;
  }
}
