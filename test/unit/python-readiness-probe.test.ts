// ReadinessProbe (engine/backends/python/readiness-probe.ts) without a stub:
// one question at a time, shared by the checks that arrive while it is open,
// late and stale answers, a stub that dies with a question open.
import { describe, expect, it } from 'vitest';
import { ReadinessProbe } from '../../engine/backends/python/readiness-probe.ts';

function probe(timeoutMs = 1000) {
  const asked: number[] = [];
  return { asked, p: new ReadinessProbe((rid) => asked.push(rid), "python model 'm' m_0", timeoutMs) };
}

describe('ReadinessProbe', () => {
  it("answers the model's word; checks made while a question is open share it", async () => {
    const { asked, p } = probe();
    const a = p.check();
    const b = p.check();
    expect(asked).toEqual([1]);
    p.reply({ rid: 1, ready: false });
    expect(await a).toBe(false);
    expect(await b).toBe(false);
    const c = p.check();
    expect(asked).toEqual([1, 2]);
    p.reply({ rid: 2, ready: true });
    expect(await c).toBe(true);
  });

  it('an error answer is not ready, whatever ready says', async () => {
    const { p } = probe();
    const a = p.check();
    p.reply({ rid: 1, ready: true, error: 'raised RuntimeError: x' });
    expect(await a).toBe(false);
  });

  it('no answer in time is not ready; the late answer serves the next check; a stale rid is ignored', async () => {
    const { asked, p } = probe(30);
    expect(await p.check()).toBe(false);
    const next = p.check();
    expect(asked).toEqual([1]);
    p.reply({ rid: 7, ready: true }); // not the open question
    p.reply({ rid: 1, ready: true });
    expect(await next).toBe(true);
  });

  it('abandon (the stub died) answers the open question with not ready', async () => {
    const { asked, p } = probe(10_000);
    const a = p.check();
    p.abandon();
    expect(await a).toBe(false);
    void p.check();
    expect(asked).toEqual([1, 2]);
    p.abandon();
  });
});
