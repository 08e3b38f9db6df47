import { describe, expect, it } from 'vitest';
import { RequestCancel, type CancelSignal } from '../../engine/api/cancel-signal.ts';

describe('RequestCancel', () => {
  it('runs each listener once on abort, in order, and none added later', () => {
    const c = new RequestCancel();
    const seen: string[] = [];
    c.addEventListener('abort', () => seen.push('a'));
    c.addEventListener('abort', () => seen.push('b'), { once: true });
    expect(c.aborted).toBe(false);
    c.abort();
    c.abort();
    expect(c.aborted).toBe(true);
    c.addEventListener('abort', () => seen.push('late'));
    expect(seen).toEqual(['a', 'b']);
  });

  it('does not run a removed listener', () => {
    const c = new RequestCancel();
    const seen: string[] = [];
    const f = () => seen.push('f');
    c.addEventListener('abort', f);
    c.addEventListener('abort', () => seen.push('g'));
    c.removeEventListener('abort', f);
    c.removeEventListener('abort', () => undefined); // not added: ignored
    c.abort();
    expect(seen).toEqual(['g']);
  });

  it('keeps running listeners after one throws, and reports the error asynchronously', async () => {
    const c = new RequestCancel();
    const seen: string[] = [];
    c.addEventListener('abort', () => {
      throw new Error('boom');
    });
    c.addEventListener('abort', () => seen.push('after'));
    const reported = new Promise<unknown>((resolve) => process.once('uncaughtException', resolve));
    expect(() => c.abort()).not.toThrow();
    expect(seen).toEqual(['after']);
    expect(((await reported) as Error).message).toBe('boom');
  });

  it('is satisfied by a real AbortSignal too (the HTTP frontend passes one)', () => {
    const ac = new AbortController();
    const s: CancelSignal = ac.signal;
    let n = 0;
    s.addEventListener('abort', () => n++, { once: true });
    ac.abort();
    expect(s.aborted).toBe(true);
    expect(n).toBe(1);
  });
});
