// A renderer for the small subset of Helm's Go-template syntax our chart
// uses, so CI can render and validate the chart where no `helm` binary can be
// installed from a package registry (Debian does not ship one; downloads are
// not allowed here). Anything outside the subset is an error naming the
// template and line, never silently passed through.
//
// Subset:
//   {{ PIPELINE }}                output; `{{-` / `-}}` trim whitespace on that side
//   {{- if PIPELINE }} ... {{- else if PIPELINE }} ... {{- else }} ... {{- end }}
//   {{/* comment */}}
//   PIPELINE = COMMAND ('|' COMMAND)*, the value of each piped in as the last argument
//   COMMAND  = operand | FUNC operand*
//   operand  = .Values.a.b | .Release.Name | .Release.Namespace | .Chart.Name | .Chart.Version
//              | .Chart.AppVersion | "string" | number | true | false
//   FUNC     = quote default toYaml nindent indent not eq ne and or required b64enc
//
// Deliberate difference from Helm: a missing value printed directly is an
// error (a typo in a values path), not an empty string; `if`, `default`,
// `not`, `and`, `or` and `required` take missing values as Helm does.
import { stringify } from 'yaml';

export interface RenderContext {
  Values: Record<string, unknown>;
  Release: { Name: string; Namespace: string; Service?: string };
  Chart: { Name: string; Version: string; AppVersion?: string };
}

type Node = { t: 'text'; s: string } | { t: 'out'; expr: string; line: number } | { t: 'if'; cond: string; line: number; then: Node[]; else: Node[] };

interface Action {
  body: string;
  line: number;
}

/** Split a template into text and actions, applying the trim markers. */
function lex(src: string, file: string): Array<string | Action> {
  const out: Array<string | Action> = [];
  let i = 0;
  let trimNext = false;
  while (i < src.length) {
    const open = src.indexOf('{{', i);
    let text = open < 0 ? src.slice(i) : src.slice(i, open);
    if (trimNext) text = text.replace(/^\s+/, '');
    if (open < 0) {
      out.push(text);
      break;
    }
    const close = src.indexOf('}}', open + 2);
    const line = src.slice(0, open).split('\n').length;
    if (close < 0) throw new Error(`${file}:${line}: unclosed '{{'`);
    let body = src.slice(open + 2, close);
    if (body.startsWith('-') && /^-\s/.test(body)) {
      text = text.replace(/\s+$/, '');
      body = body.slice(1);
    }
    trimNext = /\s-$/.test(body);
    if (trimNext) body = body.slice(0, -1);
    out.push(text, { body: body.trim(), line });
    i = close + 2;
  }
  return out;
}

/** Parse lexed pieces into a tree of text, output and if/else nodes. */
function parse(pieces: Array<string | Action>, file: string): Node[] {
  const root: Node[] = [];
  // Each open `if` on the stack: the node and whether we are in its else branch.
  // An `else if` opens an implicit if that the same `end` closes (depth counts them).
  const stack: Array<{ node: Extract<Node, { t: 'if' }>; inElse: boolean; implicit: boolean }> = [];
  const target = () => {
    const top = stack[stack.length - 1];
    return top ? (top.inElse ? top.node.else : top.node.then) : root;
  };
  for (const p of pieces) {
    if (typeof p === 'string') {
      if (p) target().push({ t: 'text', s: p });
      continue;
    }
    const { body, line } = p;
    if (body.startsWith('/*')) {
      if (!body.endsWith('*/')) throw new Error(`${file}:${line}: unclosed comment`);
      continue;
    }
    const word = /^(\w+)\b\s*(.*)$/.exec(body);
    const kw = word?.[1];
    if (kw === 'if') {
      const node = { t: 'if' as const, cond: word![2]!, line, then: [], else: [] };
      target().push(node);
      stack.push({ node, inElse: false, implicit: false });
    } else if (kw === 'else') {
      const top = stack[stack.length - 1];
      if (!top || top.inElse) throw new Error(`${file}:${line}: 'else' without an open 'if'`);
      top.inElse = true;
      const rest = word![2]!;
      if (rest) {
        const m = /^if\s+(.+)$/.exec(rest);
        if (!m) throw new Error(`${file}:${line}: unsupported '${body}'`);
        const node = { t: 'if' as const, cond: m[1]!, line, then: [], else: [] };
        top.node.else.push(node);
        stack.push({ node, inElse: false, implicit: true });
      }
    } else if (kw === 'end') {
      if (!stack.length) throw new Error(`${file}:${line}: 'end' without an open 'if'`);
      while (stack.pop()!.implicit);
    } else if (kw && ['range', 'with', 'define', 'template', 'block', 'include', 'tpl'].includes(kw)) {
      throw new Error(`${file}:${line}: '${kw}' is outside the supported template subset`);
    } else {
      target().push({ t: 'out', expr: body, line });
    }
  }
  if (stack.length) throw new Error(`${file}:${stack[stack.length - 1]!.node.line}: 'if' is never closed with 'end'`);
  return root;
}

/** Split on a separator outside double quotes. */
function splitOutsideQuotes(s: string, sep: RegExp): string[] {
  const parts: string[] = [];
  let cur = '';
  let q = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"' && s[i - 1] !== '\\') q = !q;
    if (!q && sep.test(c)) {
      parts.push(cur);
      cur = '';
    } else cur += c;
  }
  parts.push(cur);
  return parts;
}

const MISSING = Symbol('missing');

/** Helm's notion of empty: false, 0, "", nil, empty list or map. */
export function truthy(v: unknown): boolean {
  if (v === MISSING || v === undefined || v === null || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v as object).length > 0;
  return true;
}

const indentLines = (n: number, s: string) => s.split('\n').map((l) => (l ? ' '.repeat(n) + l : l)).join('\n');

function toYaml(v: unknown): string {
  if (v === MISSING || v === undefined) return 'null';
  return stringify(v, { lineWidth: 0 }).replace(/\n$/, '');
}

function str(v: unknown): string {
  if (v === MISSING || v === undefined || v === null) return '';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

const FUNCS: Record<string, (args: unknown[], where: string) => unknown> = {
  quote: (a) => JSON.stringify(str(a[a.length - 1])),
  default: (a) => (truthy(a[1]) ? a[1] : a[0]),
  toYaml: (a) => toYaml(a[0]),
  nindent: (a) => '\n' + indentLines(Number(a[0]), str(a[1])),
  indent: (a) => indentLines(Number(a[0]), str(a[1])),
  not: (a) => !truthy(a[0]),
  eq: (a) => a[0] === a[1],
  ne: (a) => a[0] !== a[1],
  and: (a) => a.every(truthy),
  or: (a) => a.some(truthy),
  required: (a, where) => {
    if (!truthy(a[1])) throw new Error(`${where}: ${str(a[0])}`);
    return a[1];
  },
  b64enc: (a) => Buffer.from(str(a[0])).toString('base64'),
};

function operand(tok: string, ctx: RenderContext, where: string): unknown {
  if (tok.startsWith('"')) return JSON.parse(tok);
  if (/^-?\d+(\.\d+)?$/.test(tok)) return Number(tok);
  if (tok === 'true' || tok === 'false') return tok === 'true';
  if (tok === '.') return ctx;
  if (tok.startsWith('.')) {
    let v: unknown = ctx;
    for (const k of tok.slice(1).split('.')) {
      if (v === null || typeof v !== 'object' || !(k in (v as object))) return MISSING;
      v = (v as Record<string, unknown>)[k];
    }
    return v;
  }
  throw new Error(`${where}: unsupported operand '${tok}'`);
}

/** Evaluate a pipeline against the context. */
function evaluate(expr: string, ctx: RenderContext, where: string): unknown {
  let piped: unknown = undefined;
  let first = true;
  for (const cmd of splitOutsideQuotes(expr, /\|/)) {
    const toks = splitOutsideQuotes(cmd.trim(), /\s/).filter(Boolean);
    if (!toks.length) throw new Error(`${where}: empty command in '${expr}'`);
    const [head, ...rest] = toks as [string, ...string[]];
    let v: unknown;
    if (FUNCS[head]) {
      const args = rest.map((t) => operand(t, ctx, where));
      if (!first) args.push(piped);
      v = FUNCS[head]!(args, where);
    } else if (/^[a-zA-Z]\w*$/.test(head)) {
      throw new Error(`${where}: function '${head}' is outside the supported template subset`);
    } else {
      if (rest.length || !first) throw new Error(`${where}: '${cmd.trim()}' is not a function call`);
      v = operand(head, ctx, where);
    }
    piped = v;
    first = false;
  }
  return piped;
}

function renderNodes(nodes: Node[], ctx: RenderContext, file: string): string {
  let out = '';
  for (const n of nodes) {
    if (n.t === 'text') out += n.s;
    else if (n.t === 'if') out += renderNodes(truthy(evaluate(n.cond, ctx, `${file}:${n.line}`)) ? n.then : n.else, ctx, file);
    else {
      const v = evaluate(n.expr, ctx, `${file}:${n.line}`);
      if (v === MISSING) throw new Error(`${file}:${n.line}: '${n.expr}' has no value (a typo in the values path?)`);
      out += str(v);
    }
  }
  return out;
}

/** Render one template's text; `file` names it in errors. */
export function renderTemplate(src: string, ctx: RenderContext, file = 'template'): string {
  return renderNodes(parse(lex(src, file), file), ctx, file);
}
