// config.pbtxt reader: a recursive-descent parser of protobuf TEXT FORMAT
// (tokens come from pbtxt-tokenizer.ts), driven by protobufjs reflection over
// inference.ModelConfig.
// The result is the plain-object form the engine uses (proto field names,
// enums as names, int64 as numbers, maps as objects). Every error names
// file:line:col of the offending token and the field path.
import protobuf from 'protobufjs';
import { messageType, TO_OBJECT } from '../../protocol/index.ts';
import { invalidArg } from '../api/status.ts';
import type { ModelConfig } from '../api/model-config.ts';
import { describe, LexError, Tokenizer, type Token } from './pbtxt-tokenizer.ts';

const INT_LIMITS: Record<string, [number, number]> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  sint32: [-(2 ** 31), 2 ** 31 - 1],
  sfixed32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  fixed32: [0, 2 ** 32 - 1],
  int64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  sint64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  sfixed64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
  fixed64: [0, Number.MAX_SAFE_INTEGER],
};
const BOOL_WORDS: Record<string, boolean> = { true: true, True: true, t: true, false: false, False: false, f: false };
const OPENERS: Record<string, string> = { '{': '}', '<': '>' };

type Obj = Record<string, unknown>;

/** One parse of one file; holds the token cursor and builds positioned errors. */
class Parser {
  private tok: Token;
  private readonly lexer: Tokenizer;

  constructor(
    text: string,
    private readonly file: string,
  ) {
    this.lexer = new Tokenizer(text);
    this.tok = this.pull('');
  }

  private pull(path: string): Token {
    try {
      return this.lexer.next();
    } catch (e) {
      if (e instanceof LexError) throw this.errAt(e.line, e.col, path, e.message);
      throw e;
    }
  }

  private errAt(line: number, col: number, path: string, what: string) {
    return invalidArg(`${this.file}:${line}:${col}: ${path ? `${path}: ` : ''}${what}`);
  }
  private err(t: Token, path: string, what: string) {
    return this.errAt(t.line, t.col, path, what);
  }

  private advance(path: string): Token {
    const t = this.tok;
    this.tok = this.pull(path);
    return t;
  }
  private isPunct(p: string): boolean {
    return this.tok.kind === 'punct' && this.tok.text === p;
  }
  private accept(p: string, path: string): boolean {
    if (!this.isPunct(p)) return false;
    this.advance(path);
    return true;
  }
  private expect(p: string, path: string, what = `'${p}'`): Token {
    if (!this.isPunct(p)) throw this.err(this.tok, path, `expected ${what}, got ${describe(this.tok)}`);
    return this.advance(path);
  }

  /** Top level: fields until end of file. */
  parseRoot(type: protobuf.Type): Obj {
    const obj: Obj = {};
    while (this.tok.kind !== 'eof') this.parseField(type, obj, '');
    return obj;
  }

  /** A `{...}` / `<...>` block; the opener is the current token. */
  private parseBlock(type: protobuf.Type, path: string): Obj {
    const open = this.tok;
    const close = OPENERS[open.text];
    if (open.kind !== 'punct' || !close) {
      throw this.err(open, path, `expected '{' to start a ${type.name}, got ${describe(open)}`);
    }
    this.advance(path);
    const obj: Obj = {};
    for (;;) {
      if (this.accept(close, path)) return obj;
      if (this.tok.kind === 'eof') {
        throw this.err(this.tok, path, `missing '${close}' for the '${open.text}' opened at ${open.line}:${open.col}`);
      }
      this.parseField(type, obj, path);
    }
  }

  private parseField(type: protobuf.Type, obj: Obj, parentPath: string): void {
    const nameTok = this.tok;
    if (nameTok.kind !== 'ident') {
      throw this.err(nameTok, parentPath, `expected a field name, got ${describe(nameTok)}`);
    }
    const field = type.fields[nameTok.text];
    if (!field) throw this.err(nameTok, parentPath, `unknown field '${nameTok.text}' in ${type.name}`);
    const name = field.name;
    const path = parentPath ? `${parentPath}.${name}` : name;
    this.advance(path);

    const repeated = field.repeated || field.map;
    if (!repeated && name in obj) throw this.err(nameTok, path, `field '${name}' is set more than once`);
    const oneof = field.partOf;
    if (oneof) {
      const other = oneof.oneof.find((n) => n !== name && n in obj);
      if (other) throw this.err(nameTok, path, `'${name}' and '${other}' are members of oneof '${oneof.name}'; set only one`);
    }

    const isMessage = field.map || field.resolvedType instanceof protobuf.Type;
    if (isMessage) this.accept(':', path);
    else this.expect(':', path, `':' after '${name}'`);

    const readOne = (elemPath: string): unknown =>
      field.map
        ? this.parseMapEntry(field as unknown as protobuf.MapField, elemPath)
        : isMessage
          ? this.parseBlock(field.resolvedType as protobuf.Type, elemPath)
          : this.parseScalar(field, elemPath);

    if (!repeated) {
      obj[name] = readOne(path);
    } else {
      const store = (v: unknown): void => {
        if (field.map) {
          const [k, val] = v as [string, unknown];
          ((obj[name] ??= {}) as Obj)[k] = val;
        } else ((obj[name] ??= []) as unknown[]).push(v);
      };
      const count = (): number => (field.map ? Object.keys((obj[name] ?? {}) as Obj).length : ((obj[name] ?? []) as unknown[]).length);
      if (this.isPunct('[')) {
        const open = this.advance(path);
        if (field.map) obj[name] ??= {};
        else obj[name] ??= [];
        while (!this.accept(']', path)) {
          if (this.tok.kind === 'eof') {
            throw this.err(this.tok, path, `missing ']' for the '[' opened at ${open.line}:${open.col}`);
          }
          store(readOne(`${path}[${count()}]`));
          if (!this.isPunct(']')) this.expect(',', path, "',' or ']'");
        }
      } else {
        store(readOne(`${path}[${count()}]`));
      }
    }
    if (!this.accept(',', path)) this.accept(';', path);
  }

  /** A map entry block `{ key: ... value: ... }`; returns [key, value]. */
  private parseMapEntry(field: protobuf.MapField, path: string): [string, unknown] {
    const open = this.tok;
    const close = OPENERS[open.text];
    if (open.kind !== 'punct' || !close) {
      throw this.err(open, path, `expected '{' to start a map entry, got ${describe(open)}`);
    }
    this.advance(path);
    const valueType = field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined;
    const keyField = { name: 'key', type: field.keyType, resolvedType: null } as unknown as protobuf.Field;
    const valField = { name: 'value', type: field.type, resolvedType: field.resolvedType } as unknown as protobuf.Field;
    let key: unknown;
    let value: unknown;
    for (;;) {
      if (this.accept(close, path)) break;
      const t = this.tok;
      if (t.kind === 'eof') throw this.err(t, path, `missing '${close}' for the '${open.text}' opened at ${open.line}:${open.col}`);
      if (t.kind !== 'ident' || (t.text !== 'key' && t.text !== 'value')) {
        throw this.err(t, path, `expected 'key' or 'value' in a map entry of '${field.name}', got ${describe(t)}`);
      }
      const sub = `${path}.${t.text}`;
      if ((t.text === 'key' ? key : value) !== undefined) throw this.err(t, sub, `field '${t.text}' is set more than once`);
      this.advance(sub);
      if (t.text === 'key') {
        this.expect(':', sub, "':' after 'key'");
        key = this.parseScalar(keyField, sub);
      } else if (valueType) {
        this.accept(':', sub);
        value = this.parseBlock(valueType, sub);
      } else {
        this.expect(':', sub, "':' after 'value'");
        value = this.parseScalar(valField, sub);
      }
      if (!this.accept(',', path)) this.accept(';', path);
    }
    const k = key === undefined ? (field.keyType === 'string' ? '' : field.keyType === 'bool' ? 'false' : '0') : String(key);
    if (value === undefined) value = valueType ? {} : defaultScalar(valField);
    return [k, value];
  }

  private parseScalar(field: protobuf.Field, path: string): unknown {
    const t = this.tok;
    if (field.resolvedType instanceof protobuf.Enum) return this.parseEnum(field.resolvedType, path);
    switch (field.type) {
      case 'string':
      case 'bytes': {
        if (t.kind !== 'string') throw this.err(t, path, `expected a string, got ${describe(t)}`);
        let v = '';
        while (this.tok.kind === 'string') v += this.advance(path).value!;
        return v;
      }
      case 'bool': {
        if (t.kind === 'ident' && t.text in BOOL_WORDS) return (this.advance(path), BOOL_WORDS[t.text]);
        if (t.kind === 'number' && (t.text === '0' || t.text === '1')) return (this.advance(path), t.text === '1');
        throw this.err(t, path, `expected true or false, got ${describe(t)}`);
      }
      case 'float':
      case 'double': {
        const neg = this.accept('-', path);
        const n = this.tok;
        let v: number | undefined;
        if (n.kind === 'number')
          v = n.text.startsWith('0x') || n.text.startsWith('0X') ? parseInt(n.text, 16) : Number(n.text.replace(/[fF]$/, ''));
        else if (n.kind === 'ident' && /^(inf|infinity)f?$/i.test(n.text)) v = Infinity;
        else if (n.kind === 'ident' && /^nanf?$/i.test(n.text)) v = NaN;
        if (v === undefined || (Number.isNaN(v) && n.kind === 'number')) {
          throw this.err(n, path, `expected a number, got ${describe(n)}`);
        }
        this.advance(path);
        return neg ? -v : v;
      }
      default:
        return this.parseInteger(field.type, path);
    }
  }

  private parseInteger(type: string, path: string): number {
    const minus = this.tok;
    const neg = this.accept('-', path);
    const t = this.tok;
    const limits = INT_LIMITS[type];
    if (!limits) throw this.err(t, path, `unsupported field type '${type}'`);
    let v: number | undefined;
    if (t.kind === 'number') {
      const s = t.text;
      if (/^0[xX][0-9a-fA-F]+$/.test(s)) v = parseInt(s.slice(2), 16);
      else if (/^0[0-7]+$/.test(s)) v = parseInt(s, 8);
      else if (/^(0|[1-9]\d*)$/.test(s)) v = Number(s);
    }
    if (v === undefined) throw this.err(t, path, `expected an integer, got ${describe(t)}`);
    if (neg) v = -v;
    if (v < limits[0] || v > limits[1] || !Number.isSafeInteger(v)) {
      throw this.err(neg ? minus : t, path, `${neg ? '-' : ''}${t.text} is out of range for ${type}`);
    }
    this.advance(path);
    return v === 0 ? 0 : v; // no -0
  }

  private parseEnum(e: protobuf.Enum, path: string): string {
    const minus = this.tok;
    const neg = this.accept('-', path);
    const t = this.tok;
    const allowed = Object.keys(e.values).join(', ');
    if (t.kind === 'ident' && !neg) {
      if (!(t.text in e.values)) throw this.err(t, path, `unknown ${e.name} value '${t.text}'; expected one of ${allowed}`);
      this.advance(path);
      return t.text;
    }
    if (t.kind === 'number' && /^\d+$/.test(t.text)) {
      const n = (neg ? -1 : 1) * Number(t.text);
      const name = e.valuesById[n];
      if (name === undefined) throw this.err(neg ? minus : t, path, `${n} is not a ${e.name} value; expected one of ${allowed}`);
      this.advance(path);
      return name;
    }
    throw this.err(t, path, `expected a ${e.name} value (one of ${allowed}), got ${describe(t)}`);
  }
}

function defaultScalar(field: protobuf.Field): unknown {
  if (field.resolvedType instanceof protobuf.Enum) return field.resolvedType.valuesById[0];
  if (field.type === 'string' || field.type === 'bytes') return '';
  if (field.type === 'bool') return false;
  return 0;
}

/**
 * Parse protobuf text of a message type (default inference.ModelConfig) into
 * its plain-object form, canonicalized through the reflected type (repeated
 * fields as arrays, maps as objects, even when empty) so it round-trips.
 */
export function parsePbtxt(text: string, file: string, typeName = 'inference.ModelConfig'): Record<string, unknown> {
  const type = messageType(typeName);
  const obj = new Parser(text, file).parseRoot(type);
  return type.toObject(type.fromObject(obj), TO_OBJECT);
}

/** Parse a config.pbtxt; throws INVALID_ARG naming file:line:col and the field path. */
export function parseModelConfigText(text: string, file: string): ModelConfig {
  return parsePbtxt(text, file) as ModelConfig;
}
