// The rollout manager: every gateway runs one. It follows the running
// rollouts in the store (one per function), routes each call of a covered
// function to its side (traffic-split.ts), times it, mirrors a share of
// stable calls to the shadow (shadow-call.ts), and every tick pushes its
// counts to the store and — when it holds the function's judge lock — judges
// the step from every gateway's counts (gate-analysis.ts): hold, next step,
// promote (a new bundle version making the next target stable), or roll back
// at once. A rollback only stops routing: canary calls in flight hold their
// resolved function and finish.
//
// Ownership: owns the local counts, the followed records and the tick timer.
// Event loop only; one tick runs at a time.
import type { EngineApi } from '../upstream/engine-client.ts';
import type { MetadataSource, ResolvedFunction } from '../calls/function-registry.ts';
import type { FunctionDefinition } from '../calls/function-schema.ts';
import { gatewayLog as log } from '../../common/logger.ts';
import type { CallRouter, CallMeta, EngineRun } from '../calls/call-route.ts';
import { bucketIndex, judgeStep, quantileMs } from './gate-analysis.ts';
import { resolveTarget } from './rollout-check.ts';
import { currentShare, type RolloutRecord, type SideNumbers } from './rollout-spec.ts';
import { mergeDelta, type RolloutStore, type StatDelta } from './rollout-store.ts';
import { copyInputs, diffOutputs, shadowRequest } from './shadow-call.ts';
import { chooseSide, pinnedSide, SplitCounter, type Side } from './traffic-split.ts';
import type { InputTensor, OutputTensor } from '../calls/payload-codec.ts';
import type { TensorSpec } from '../calls/function-registry.ts';

export interface RolloutManagerOptions {
  store: RolloutStore;
  /** The stable function now (the registry's resolve). */
  resolve(name: string): Promise<ResolvedFunction>;
  engine: Pick<MetadataSource, 'modelMetadata'> & Pick<EngineApi, 'infer'>;
  /** Make `target` the function's stable target (a new bundle version); resolves with that version. */
  promote(name: string, target: FunctionDefinition['target']): Promise<string>;
  /** This gateway's id (the judge lock's owner). */
  owner: string;
  /** Tick: push counts, follow the store, judge (ms; default 200). */
  tickMs?: number;
  /** Shadow calls running at once, past which mirrors are skipped (default 64). */
  maxShadowInFlight?: number;
}

interface Live {
  rec: RolloutRecord;
  counter: SplitCounter;
  shadowCounter: SplitCounter;
  canary?: ResolvedFunction;
  shadow?: ResolvedFunction;
}

const numbers = (d: StatDelta): SideNumbers => ({ calls: d.calls, errors: d.errors, p95Ms: quantileMs(d.buckets, 0.95) });

export class RolloutManager implements CallRouter {
  private live = new Map<string, Live>();
  private readonly counts = new Map<string, { id: string; step: number; side: string; d: StatDelta }>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private shadowInFlight = 0;
  /** Mirrors skipped because maxShadowInFlight were running. */
  shadowSkipped = 0;

  constructor(private readonly o: RolloutManagerOptions) {}

  async start(): Promise<void> {
    await this.tick().catch((e) => log.warn(`rollouts: ${(e as Error).message}`));
    this.timer = setInterval(() => void this.tick().catch((e) => log.warn(`rollouts: ${(e as Error).message}`)), this.o.tickMs ?? 200);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.ticking;
    await this.flush().catch(() => undefined); // best effort: the store may be gone
  }

  /** The rollout covering a function on this gateway now, if any. */
  following(name: string): RolloutRecord | undefined {
    return this.live.get(name)?.rec;
  }

  async run(fn: ResolvedFunction, id: string, meta: CallMeta | undefined, inputs: InputTensor[], specs: TensorSpec[], run: EngineRun) {
    const live = this.live.get(fn.name);
    if (!live) return run(fn);
    const rec = live.rec;
    let side: Side = 'stable';
    if (live.canary)
      side = chooseSide(currentShare(rec), rec.id, pinnedSide(meta?.pin), meta?.clientId === false ? undefined : id, live.counter);
    const t0 = performance.now();
    let res;
    try {
      res = await run(side === 'canary' ? live.canary! : fn);
    } catch (e) {
      this.count(rec.id, rec.step, side, performance.now() - t0, false);
      throw e;
    }
    this.count(rec.id, rec.step, side, performance.now() - t0, true);
    if (live.shadow && side === 'stable' && live.shadowCounter.next() === 'canary') this.mirror(live, fn, id, inputs, specs, res.outputs);
    return { ...res, side };
  }

  private count(id: string, step: number, side: string, ms: number, ok: boolean, diff?: { maxAbsDiff: number; mismatch: boolean }): void {
    const k = `${id}|${step}|${side}`;
    let c = this.counts.get(k);
    if (!c) this.counts.set(k, (c = { id, step, side, d: { calls: 0, errors: 0, buckets: new Map() } }));
    c.d.calls++;
    if (!ok) c.d.errors++;
    const b = bucketIndex(ms);
    c.d.buckets.set(b, (c.d.buckets.get(b) ?? 0) + 1);
    if (diff) {
      c.d.diffMicro = (c.d.diffMicro ?? 0) + Math.min(diff.maxAbsDiff, 1e9) * 1e6;
      if (diff.mismatch) c.d.mismatches = (c.d.mismatches ?? 0) + 1;
    }
  }

  private mirror(live: Live, fn: ResolvedFunction, id: string, inputs: InputTensor[], specs: TensorSpec[], outputs: OutputTensor[]): void {
    if (this.shadowInFlight >= (this.o.maxShadowInFlight ?? 64)) {
      this.shadowSkipped++;
      return;
    }
    const shadow = live.shadow!;
    const ins = copyInputs(inputs); // the call's slices are released when it returns
    const outs = outputs.map((o) => ({ ...o, bytes: Uint8Array.from(o.bytes) }));
    const rid = live.rec.id;
    this.shadowInFlight++;
    const t0 = performance.now();
    setImmediate(() => {
      this.o.engine
        .infer(shadowRequest(shadow, id, ins, specs), fn.name, fn.definition.limits.timeoutMs)
        .then((res) => this.count(rid, 0, 'shadow', performance.now() - t0, true, diffOutputs(outs, res)))
        .catch(() => this.count(rid, 0, 'shadow', performance.now() - t0, false))
        .finally(() => this.shadowInFlight--);
    });
  }

  /** One tick: push counts, follow the store, judge what this gateway holds the lock of. */
  tick(): Promise<void> {
    if (this.ticking) return this.ticking;
    this.ticking = (async () => {
      await this.flush();
      await this.follow();
      for (const l of [...this.live.values()]) {
        if (await this.o.store.lock(l.rec.function, this.o.owner, (this.o.tickMs ?? 200) * 10)) await this.judge(l.rec);
      }
    })().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  private async flush(): Promise<void> {
    const all = [...this.counts.values()];
    this.counts.clear();
    try {
      await Promise.all(all.map((c) => this.o.store.addStats(c.id, c.step, c.side, c.d)));
    } catch (e) {
      for (const c of all) {
        // keep them for the next tick
        const k = `${c.id}|${c.step}|${c.side}`;
        const cur = this.counts.get(k);
        if (cur) mergeDelta(cur.d, c.d);
        else this.counts.set(k, c);
      }
      throw e;
    }
  }

  /** Follow the store's running rollouts: new ones resolved, changed steps get a fresh split counter. */
  async follow(): Promise<void> {
    const recs = await this.o.store.active();
    const next = new Map<string, Live>();
    for (const rec of recs) {
      const old = this.live.get(rec.function);
      if (old && old.rec.id === rec.id && old.rec.step === rec.step) {
        old.rec = rec;
        next.set(rec.function, old);
        continue;
      }
      const l: Live = { rec, counter: new SplitCounter(currentShare(rec)), shadowCounter: new SplitCounter(rec.spec.shadow?.share ?? 0) };
      if (old && old.rec.id === rec.id) Object.assign(l, { canary: old.canary, shadow: old.shadow, shadowCounter: old.shadowCounter });
      else await this.resolveSides(l);
      next.set(rec.function, l);
    }
    this.live = next;
  }

  private async resolveSides(l: Live): Promise<void> {
    const { spec } = l.rec;
    try {
      const stable = await this.o.resolve(l.rec.function);
      if (spec.next) l.canary = (await resolveTarget(this.o.engine, stable, spec.next.target, 'next')).fn;
      if (spec.shadow) l.shadow = (await resolveTarget(this.o.engine, stable, spec.shadow.target, 'shadow')).fn;
    } catch (e) {
      log.warn(
        `rollout ${l.rec.id} of '${l.rec.function}': cannot resolve its targets yet (${(e as Error).message}); calls stay on stable`,
      );
    }
  }

  /** Judge one rollout's step from every gateway's counts and store the numbers and the decision. */
  private async judge(followed: RolloutRecord): Promise<void> {
    const now = Date.now();
    const { store } = this.o;
    const rec = await store.byId(followed.id); // the store's copy: an abort by hand may have ended it
    if (!rec || rec.state !== 'running') return this.follow();
    if (rec.spec.shadow) {
      const s = await store.readStats(rec.id, 0, 'shadow');
      rec.shadow = { ...numbers(s), maxAbsDiff: s.calls ? (s.diffMicro ?? 0) / 1e6 / s.calls : 0, mismatches: s.mismatches ?? 0 };
    }
    const step = rec.steps[rec.step];
    if (rec.spec.next && step) {
      step.stable = numbers(await store.readStats(rec.id, rec.step, 'stable'));
      step.canary = numbers(await store.readStats(rec.id, rec.step, 'canary'));
      // At 100 % no call goes to stable: the step before is the reference.
      const ref = step.share >= 100 && rec.step > 0 ? rec.steps[rec.step - 1]!.stable : step.stable;
      const d = judgeStep(rec.spec, rec.step, step.startedAt, now, ref, step.canary);
      if (d.action !== 'hold') {
        step.endedAt = now;
        step.reason = d.reason;
        if (d.action === 'advance') {
          step.decision = 'promoted';
          rec.step++;
          rec.steps.push({ share: rec.spec.steps![rec.step]!.share, startedAt: now, stable: zero(), canary: zero() });
        } else if (d.action === 'complete') {
          rec.promotedVersion = await this.o.promote(rec.function, rec.spec.next.target);
          step.decision = 'completed';
          rec.state = 'promoted';
        } else {
          step.decision = 'rolled_back';
          rec.state = 'rolled_back';
        }
        log.info(`rollout ${rec.id} of '${rec.function}': ${step.decision} at ${step.share} %: ${d.reason}`);
      }
    }
    rec.updatedAt = now;
    await store.save(rec);
    if (rec.state !== 'running') await this.follow();
  }
}

export const zero = (): SideNumbers => ({ calls: 0, errors: 0, p95Ms: 0 });
