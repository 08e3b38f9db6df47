// House rule: no function, method, constructor, accessor or arrow function in
// the project's own sources over 100 lines, counted from its first line to its
// last. A long one is split where its steps split (build this, then that),
// not cut into arbitrary chunks. Planted samples show the scan finds each shape.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectFunctionSpans, sourceFunctionSpans } from '../fixtures/function-length.ts';
import { ROOT, rel, sourceFiles } from '../fixtures/source-scan.ts';

const LIMIT = 100;
const DIRS = ['engine', 'gateway', 'client', 'common', 'protocol', 'net', 'functions', 'scripts', 'deploy/tools'];

/** `n` statements, one per line. */
const body = (n: number): string => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');

describe('function length', () => {
  it('the scan counts each kind of function from its first line to its last', () => {
    const src = [
      '// a comment above is not counted', // 1
      `export function long(): void {\n${body(99)}\n}`, // 2..102: 101 lines
      `function exact(): void {\n${body(98)}\n}`, // 103..202: 100 lines
      `const arrow = async (): Promise<void> => {\n${body(99)}\n};`, // 203..303: 101 lines
      'class Box {', // 304
      `  constructor() {\n${body(99)}\n  }`, // 305..405: 101
      `  get size(): number {\n${body(99)}\n  return 1; }`, // 406..506: 101
      `  private static helper = () => {\n${body(99)}\n  };`, // 507..607: 101
      '}',
      `app.get('/x', (c) => {\n${body(99)}\n});`, // 609..709: 101
      'const s = `}}}\n{{{`; // braces in a string do not count',
      `req.onResponse = (r) => {\n${body(99)}\n};`, // 712..812: 101
    ].join('\n');
    const long = sourceFunctionSpans(src).filter((f) => f.lines > LIMIT);
    expect(long.map((f) => `${f.line}:${f.name}:${f.lines}`)).toEqual([
      '2:long:101',
      '203:arrow:101',
      '305:Box.constructor:101',
      '406:Box.size:101',
      '507:Box.helper:101',
      '609:app.get callback:101',
      '712:req.onResponse:101',
    ]);
    expect(sourceFunctionSpans(src).find((f) => f.name === 'exact')).toMatchObject({ line: 103, lines: LIMIT });
  });

  it('a nested function counts inside its outer one and on its own', () => {
    const src = `function outer() {\n  const inner = () => {\n${body(100)}\n  };\n  return () => inner;\n}`;
    expect(sourceFunctionSpans(src).map((f) => `${f.line}:${f.name}:${f.lines}`)).toEqual([
      '1:outer:105',
      '2:inner:102',
      '104:(anonymous in outer):1',
    ]);
  });

  it(`no source function over ${LIMIT} lines`, () => {
    const files = sourceFiles(DIRS);
    expect(files.length).toBeGreaterThan(100);
    const spans = projectFunctionSpans(path.join(ROOT, 'tsconfig.json'), files);
    expect(spans.length).toBeGreaterThan(1000);
    const over = spans.filter((f) => f.lines > LIMIT).map((f) => `${rel(f.file)}:${f.line}:${f.name}:${f.lines}`);
    expect(over, `split these where their steps split (file:line:name:lines)`).toEqual([]);
  }, 60_000);
});
