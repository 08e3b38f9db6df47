import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOG, GatewayError, catalogMarkdown, formatMessage } from '../../gateway/core/errors.ts';

describe('gateway error catalog', () => {
  it('docs/gateway/errors.md carries exactly the catalog table', () => {
    const doc = fs.readFileSync(new URL('../../docs/gateway/errors.md', import.meta.url), 'utf8');
    const m = /<!-- errors:begin -->\n([\s\S]*?)\n<!-- errors:end -->/.exec(doc);
    expect(m, 'docs/gateway/errors.md has the errors:begin/end markers').not.toBeNull();
    expect(m![1]!.trim()).toBe(catalogMarkdown());
  });

  it('every code has an error status and a message', () => {
    for (const [code, e] of Object.entries(ERROR_CATALOG)) {
      expect(e.status, code).toBeGreaterThanOrEqual(400);
      expect(e.status, code).toBeLessThan(600);
      expect(e.message.length, code).toBeGreaterThan(5);
      expect(code).toMatch(/^[A-Z_]+$/);
    }
  });

  it('fills placeholders and keeps unknown ones visible', () => {
    expect(formatMessage("input '{input}' of '{name}'", { input: 'RAW_IMAGE', name: 'f' })).toBe("input 'RAW_IMAGE' of 'f'");
    expect(formatMessage('{a} {b}', { a: 1 })).toBe('1 {b}');
  });

  it('GatewayError carries code, status and a JSON body', () => {
    const e = new GatewayError('INPUT_MISSING', { name: 'fn', input: 'x' });
    expect(e.status).toBe(400);
    expect(e.toJSON()).toEqual({ error: { code: 'INPUT_MISSING', message: "function 'fn' requires input 'x'" } });
    expect(new GatewayError('ENGINE_TIMEOUT', { name: 'f', timeoutMs: 5 }).status).toBe(504);
  });
});
