// Protobuf TEXT FORMAT tokenizer for config.pbtxt: identifiers, numbers,
// quoted strings (C-style escapes decoded to UTF-8), punctuation and '#'
// comments. Each token carries its 1-based line:col so the parser's errors
// can name the offending spot.

export type TokKind = 'ident' | 'number' | 'string' | 'punct' | 'eof';
/** One token with its 1-based start position. */
export interface Token {
  kind: TokKind;
  text: string; // raw text (numbers, identifiers, punctuation)
  value?: string; // decoded value of a string token
  line: number;
  col: number;
}

/** A bad character or string literal at line:col; the parser adds file and field path. */
export class LexError extends Error {
  constructor(
    readonly line: number,
    readonly col: number,
    message: string,
  ) {
    super(message);
  }
}

const PUNCT = new Set(['{', '}', '<', '>', '[', ']', ':', ',', ';', '-']);
const NUMBER_RE = /(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?)/y;
const IDENT_RE = /[A-Za-z_][A-Za-z0-9_]*/y;
const SIMPLE_ESCAPES: Record<string, number> = {
  n: 10,
  t: 9,
  r: 13,
  a: 7,
  b: 8,
  f: 12,
  v: 11,
  '\\': 92,
  "'": 39,
  '"': 34,
  '?': 63,
};

/** Pulls tokens on demand; positions are 1-based, columns count code points. */
export class Tokenizer {
  private pos = 0;
  private line = 1;
  private col = 1;
  constructor(private readonly src: string) {}

  private advance(n: number): void {
    for (let i = 0; i < n; i++) {
      const c = this.src.charCodeAt(this.pos++);
      if (c === 10) {
        this.line++;
        this.col = 1;
      } else if (c < 0xdc00 || c > 0xdfff) this.col++; // low surrogates share a column
    }
  }

  next(): Token {
    const s = this.src;
    for (;;) {
      const c = s[this.pos];
      if (c === undefined) return { kind: 'eof', text: '', line: this.line, col: this.col };
      if (c === '#') {
        while (this.pos < s.length && s[this.pos] !== '\n') this.advance(1);
      } else if (/\s/.test(c) || c === '\uFEFF') this.advance(1);
      else break;
    }
    const line = this.line;
    const col = this.col;
    const c = s[this.pos]!;
    if (c === '"' || c === "'") return this.string(c, line, col);
    if (/[0-9.]/.test(c)) {
      NUMBER_RE.lastIndex = this.pos;
      const m = NUMBER_RE.exec(s);
      if (m) {
        IDENT_RE.lastIndex = this.pos + m[0].length;
        const tail = IDENT_RE.exec(s)?.[0] ?? '';
        this.advance(m[0].length + tail.length);
        return { kind: 'number', text: m[0] + tail, line, col };
      }
    }
    IDENT_RE.lastIndex = this.pos;
    const id = IDENT_RE.exec(s);
    if (id) {
      this.advance(id[0].length);
      return { kind: 'ident', text: id[0], line, col };
    }
    if (PUNCT.has(c)) {
      this.advance(1);
      return { kind: 'punct', text: c, line, col };
    }
    throw new LexError(line, col, `unexpected character '${c}'`);
  }

  private string(quote: string, line: number, col: number): Token {
    const s = this.src;
    const start = this.pos;
    this.advance(1);
    const bytes: number[] = [];
    const enc = new TextEncoder();
    for (;;) {
      const c = s[this.pos];
      if (c === undefined || c === '\n') throw new LexError(line, col, 'unterminated string starting here');
      if (c === quote) {
        this.advance(1);
        break;
      }
      if (c !== '\\') {
        const cp = s.codePointAt(this.pos)!;
        const ch = String.fromCodePoint(cp);
        bytes.push(...enc.encode(ch));
        this.advance(ch.length);
        continue;
      }
      const escLine = this.line;
      const escCol = this.col;
      const e = s[this.pos + 1] ?? '';
      let m: RegExpMatchArray | null;
      if (e in SIMPLE_ESCAPES) {
        bytes.push(SIMPLE_ESCAPES[e]!);
        this.advance(2);
      } else if ((m = s.slice(this.pos + 1, this.pos + 4).match(/^[0-7]{1,3}/))) {
        bytes.push(parseInt(m[0], 8) & 0xff);
        this.advance(1 + m[0].length);
      } else if ((m = s.slice(this.pos + 1, this.pos + 4).match(/^[xX]([0-9a-fA-F]{1,2})/))) {
        bytes.push(parseInt(m[1]!, 16));
        this.advance(1 + m[0].length);
      } else if ((m = s.slice(this.pos + 1, this.pos + 10).match(/^(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))/))) {
        const cp = parseInt((m[1] ?? m[2])!, 16);
        if (cp > 0x10ffff) throw new LexError(escLine, escCol, `invalid escape sequence '\\${m[0]}'`);
        bytes.push(...enc.encode(String.fromCodePoint(cp)));
        this.advance(1 + m[0].length);
      } else {
        throw new LexError(escLine, escCol, `invalid escape sequence '\\${e === '\n' ? '' : e}'`);
      }
    }
    const value = new TextDecoder().decode(new Uint8Array(bytes));
    return { kind: 'string', text: s.slice(start, this.pos), value, line, col };
  }
}

/** How a token reads in an error message. */
export function describe(t: Token): string {
  switch (t.kind) {
    case 'eof':
      return 'end of file';
    case 'string':
      return `string ${t.text}`;
    case 'punct':
      return `'${t.text}'`;
    default:
      return `"${t.text}"`;
  }
}
