// House rule: no .ts source file over 300 lines unless its first lines say
// why (`// over 300 lines: <reason>`). Tests and benchmarks are not sources.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { lineCount, oversizeReason, rel, sourceFiles } from '../fixtures/source-scan.ts';

const LIMIT = 300;
const DIRS = ['engine', 'gateway', 'client', 'common', 'protocol', 'net', 'functions', 'scripts', 'deploy/tools'];

describe('file size', () => {
  it('the check counts lines and reads a reason only from the head of a file', () => {
    const long = Array.from({ length: LIMIT + 1 }, (_, i) => `const a${i} = ${i};`).join('\n') + '\n';
    expect(lineCount(long)).toBe(LIMIT + 1);
    expect(lineCount('a\nb')).toBe(2);
    expect(oversizeReason(long)).toBeUndefined();
    expect(oversizeReason(`// over 300 lines: one parser, one grammar\n${long}`)).toBe('one parser, one grammar');
    expect(oversizeReason(`${'x\n'.repeat(10)}// over 300 lines: too late\n`)).toBeUndefined();
    expect(oversizeReason('// over 300 lines:\n')).toBeUndefined();
  });

  it(`no source file over ${LIMIT} lines without a reason at its top`, () => {
    const files = sourceFiles(DIRS);
    expect(files.length).toBeGreaterThan(100);
    const over = files
      .map((f) => ({ f, text: fs.readFileSync(f, 'utf8') }))
      .filter(({ text }) => lineCount(text) > LIMIT && !oversizeReason(text))
      .map(({ f, text }) => `${rel(f)}: ${lineCount(text)} lines`);
    expect(over, `split these, or write '// over 300 lines: <reason>' in their first lines`).toEqual([]);
  });
});
