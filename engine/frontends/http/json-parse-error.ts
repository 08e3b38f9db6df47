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
  let i = 0;
  const fail = (message: string, at = i): never => {
    throw new Failure(message, at);
  };
  const ws = () => {
    while (i < bytes.length && WS.has(bytes[i]!)) i++;
  };
  const literal = (word: string) => {
    for (let k = 1; k < word.length; k++) if (bytes[++i] !== word.charCodeAt(k)) fail('Invalid value.');
    i++;
  };
  const string = () => {
    i++; // the opening quote
    for (;;) {
      const c = bytes[i];
      if (c === undefined || c === 0) fail('Missing a closing quotation mark in string.');
      if (c === 0x22) return void i++;
      if (c === 0x5c) {
        const e = bytes[i + 1];
        // rapidjson reports a bad escape at its backslash.
        if (e === 0x75) {
          for (let k = 2; k < 6; k++)
            if (!/[0-9a-fA-F]/.test(String.fromCharCode(bytes[i + k] ?? 0))) fail('Incorrect hex digit after \\u escape in string.');
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(String.fromCharCode(e))) i += 2;
        else fail('Invalid escape character in string.');
      } else if (c! < 0x20) fail('Invalid encoding in string.');
      else i++;
    }
  };
  const number = () => {
    const start = i;
    if (bytes[i] === 0x2d) i++;
    if (!isDigit(bytes[i])) fail('Invalid value.', start);
    if (bytes[i] === 0x30) i++;
    else while (isDigit(bytes[i])) i++;
    if (bytes[i] === 0x2e) {
      i++;
      if (!isDigit(bytes[i])) fail('Missing fraction part in number.');
      while (isDigit(bytes[i])) i++;
    }
    if (bytes[i] === 0x65 || bytes[i] === 0x45) {
      i++;
      if (bytes[i] === 0x2b || bytes[i] === 0x2d) i++;
      if (!isDigit(bytes[i])) fail('Missing exponent in number.');
      while (isDigit(bytes[i])) i++;
    }
    const text = Buffer.from(bytes.subarray(start, i)).toString('latin1');
    if (!Number.isFinite(Number(text))) fail('Number too big to be stored in double.', start);
  };
  // A loop with an explicit stack of open containers: no recursion, so no body can overflow the stack.
  const open: number[] = [];
  const name = () => {
    if (bytes[i] !== 0x22) fail('Missing a name for object member.');
    string();
    ws();
    if (bytes[i] !== 0x3a) fail('Missing a colon after a name of object member.');
    i++;
  };
  const document = () => {
    let wantValue = true;
    for (;;) {
      if (wantValue) {
        ws();
        const c = bytes[i];
        if (c === 0x7b || c === 0x5b) {
          open.push(c);
          i++;
          ws();
          if (bytes[i] === (c === 0x7b ? 0x7d : 0x5d)) {
            open.pop();
            i++;
            wantValue = false;
          } else if (c === 0x7b) name();
          continue;
        }
        if (c === 0x6e) literal('null');
        else if (c === 0x74) literal('true');
        else if (c === 0x66) literal('false');
        else if (c === 0x22) string();
        else number();
        wantValue = false;
      }
      if (!open.length) return;
      ws();
      const top = open[open.length - 1]!;
      if (bytes[i] === 0x2c) {
        i++;
        ws();
        if (top === 0x7b) name();
        wantValue = true;
      } else if (bytes[i] === (top === 0x7b ? 0x7d : 0x5d)) {
        open.pop();
        i++;
      } else {
        fail(top === 0x7b ? "Missing a comma or '}' after an object member." : "Missing a comma or ']' after an array element.");
      }
    }
  };
  try {
    ws();
    if (i >= bytes.length) fail('The document is empty.');
    document();
    ws();
    if (i < bytes.length) fail('The document root must not be followed by other values.');
    return undefined;
  } catch (e) {
    if (e instanceof Failure) return { message: e.message, offset: e.offset };
    throw e;
  }
}
