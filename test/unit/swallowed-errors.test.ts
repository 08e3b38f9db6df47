// No silently swallowed errors in engine/, gateway/, client/, common/: every
// catch that drops an error (empty block, bare return, `.catch(() => {})`,
// `.on('error', () => undefined)`) says why in a comment inside it, on its
// line or on the line above. Planted samples show the scan finds each shape.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { rel, silentCatches, sourceFiles } from '../fixtures/source-scan.ts';

describe('silentCatches (the scan)', () => {
  it('finds each way of dropping an error without a word', () => {
    const src = [
      'try { a(); } catch {}', // 1
      'try { a(); } catch (e) {', // 2
      '}',
      'try { a(); } catch {', // 4
      '  return undefined;',
      '}',
      'p.catch(() => undefined);', // 7
      'p.catch(() => {});', // 8
      'p.catch((e) => null);', // 9
      "sock.on('error', () => undefined);", // 10
      'for (const x of xs) { try { a(x); } catch { continue; } }', // 11
    ].join('\n');
    expect(silentCatches(src)).toEqual([1, 2, 4, 7, 8, 9, 10, 11]);
  });

  it('accepts a handler that logs, rethrows, uses the error, or says why it drops it', () => {
    const src = [
      'try { a(); } catch (e) { log.warn(String(e)); }',
      'try { a(); } catch (e) { throw wrap(e); }',
      'p.catch((e) => log.error("x", e));',
      'p.catch(() => fallback());',
      '// the exit handler reports it',
      "sock.on('error', () => undefined);",
      'p.catch(() => undefined); // retried on the next tick',
      'try { a(); } catch {',
      '  // not there: nothing to clean',
      '}',
      'try { a(); } catch {',
      '  return false; // absent means not ready',
      '}',
    ].join('\n');
    expect(silentCatches(src)).toEqual([]);
  });

  it('no source file drops an error silently', () => {
    const found: string[] = [];
    for (const f of sourceFiles(['engine', 'gateway', 'client', 'common', 'net'])) {
      const text = fs.readFileSync(f, 'utf8');
      for (const line of silentCatches(text)) found.push(`${rel(f)}:${line}: ${text.split('\n')[line - 1]!.trim()}`);
    }
    expect(found, 'each catch must log, rethrow, or say in a comment why dropping the error is right').toEqual([]);
  });
});
