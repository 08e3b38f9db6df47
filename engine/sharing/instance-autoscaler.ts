// Adaptive instance counts, the moving part (ours): every window it reads each
// adaptive model's statistics, asks decideInstances for changes, and applies
// them through the backend (addInstance / removeInstance) and the model's
// InstancePool. A model is adaptive when its config sets parameters
// max_instance_count above its instance_group count and its backend can add
// instances (onnxruntime). One tick at a time; main thread.
import os from 'node:os';
import type { ModelVersion } from '../api/model-version.ts';
import type { MemoryBudget } from './model-memory-budget.ts';
import type { ModelStatistics } from '../api/server-api.ts';
import {
  decideInstances,
  DEFAULT_INSTANCE_POLICY,
  type InstancePolicy,
  type InstanceWindow,
  type Streak,
} from './instance-count-decision.ts';
import { log, tracer } from '../../common/logger.ts';
import type { RateLimiter } from './rate-limiter.ts';
import type { ExecutionInstance } from '../api/scheduler.ts';

const trace = tracer('autoscaler');

export interface AutoscalerOptions {
  versions: () => ModelVersion[];
  budget?: MemoryBudget;
  /** With --rate-limit, added instances are rate-limited like the configured ones. */
  rateLimiter?: RateLimiter;
  windowMs?: number;
  policy?: Partial<InstancePolicy>;
}

/** instance_group count (min) and max_instance_count (max) of an adaptive model; undefined when not adaptive. */
export function instanceRange(mv: ModelVersion): { min: number; max: number } | undefined {
  const max = Number(mv.config.parameters?.max_instance_count?.string_value ?? NaN);
  const min = (mv.config.instance_group ?? []).reduce((a, g) => a + g.count, 0);
  if (!Number.isInteger(max) || max <= min || !mv.pool || !mv.backend.addInstance || !mv.backend.removeInstance) return undefined;
  return { min, max };
}

interface Seen {
  queueCount: number;
  queueNs: number;
  execNs: number;
  atNs: bigint;
}

/** Idle and total CPU time of the whole machine so far (ms, summed over cores). */
function machineCpu(): { idle: number; total: number } {
  let idle = 0;
  let total = 0;
  for (const c of os.cpus()) {
    idle += c.times.idle;
    total += c.times.user + c.times.nice + c.times.sys + c.times.irq + c.times.idle;
  }
  return { idle, total };
}

const execNsOf = (s: ModelStatistics) =>
  s.batch_stats.reduce((a, b) => a + b.compute_input.ns + b.compute_infer.ns + b.compute_output.ns, 0);

export class InstanceAutoscaler {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private streaks = new Map<string, Streak>();
  private readonly seen = new WeakMap<ModelVersion, Seen>();
  private lastCpu = machineCpu();
  /** Rate-limited wrappers of added instances: the backend's instance and how to leave the limiter. */
  private readonly wrapped = new WeakMap<ExecutionInstance, { raw: ExecutionInstance; unregister: () => void }>();
  /** Changes applied, for tests and the log: [model, delta, instances after]. */
  readonly history: Array<{ model: string; delta: number; instances: number; atMs: number }> = [];

  constructor(private readonly opts: AutoscalerOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.opts.windowMs ?? 250);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One window: observe, decide, apply. */
  async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const now = process.hrtime.bigint();
      const windows: Array<InstanceWindow & { mv: ModelVersion }> = [];
      // Cores taken by the instances of fixed-count models that had traffic this window.
      let fixedBusyCores = 0;
      for (const mv of this.opts.versions()) {
        if (mv.state !== 'READY' || !mv.pool) continue;
        const range = instanceRange(mv);
        const s = mv.stats.snapshot();
        const cur: Seen = {
          queueCount: s.inference_stats.queue.count,
          queueNs: s.inference_stats.queue.ns,
          execNs: execNsOf(s),
          atNs: now,
        };
        const prev = this.seen.get(mv);
        this.seen.set(mv, cur);
        if (!prev) continue;
        const instances = mv.pool.instances.length;
        const requests = cur.queueCount - prev.queueCount;
        if (!range) {
          if (requests > 0) fixedBusyCores += instances;
          continue;
        }
        const windowNs = Number(now - prev.atNs);
        const bytes = this.opts.budget?.bytesOf(mv.name) ?? 0;
        windows.push({
          mv,
          name: mv.name,
          instances,
          ...range,
          requests,
          meanQueueNs: requests > 0 ? (cur.queueNs - prev.queueNs) / requests : 0,
          busyFraction: windowNs > 0 ? (cur.execNs - prev.execNs) / (windowNs * instances) : 0,
          instanceBytes: instances > 0 ? Math.ceil(bytes / instances) : 0,
        });
      }
      const cpu = machineCpu();
      const idleCores =
        cpu.total > this.lastCpu.total ? ((cpu.idle - this.lastCpu.idle) / (cpu.total - this.lastCpu.total)) * os.cpus().length : 0;
      this.lastCpu = cpu;
      const budget = this.opts.budget;
      const policy: InstancePolicy = {
        ...DEFAULT_INSTANCE_POLICY,
        cores: Math.max(0, os.availableParallelism() - fixedBusyCores),
        idleCores,
        freeBytes: budget ? budget.budgetBytes - budget.usedBytes() : Infinity,
        ...this.opts.policy,
      };
      const d = decideInstances(windows, this.streaks, policy);
      this.streaks = d.streaks;
      for (const c of d.changes) await this.apply(windows.find((w) => w.name === c.name)!, c.delta);
    } catch (err) {
      log.error('adaptive instances: window failed', err);
    } finally {
      this.running = false;
    }
  }

  private async apply(w: InstanceWindow & { mv: ModelVersion }, delta: 1 | -1): Promise<void> {
    const { mv } = w;
    const pool = mv.pool!;
    if (delta > 0) {
      const inst = await mv.backend.addInstance!();
      if (mv.state !== 'READY') {
        await mv.backend.removeInstance!(inst); // unloaded meanwhile
        return;
      }
      const limited = this.opts.rateLimiter?.register(mv.name, mv.config, [inst]);
      if (limited) this.wrapped.set(limited.instances[0]!, { raw: inst, unregister: limited.unregister });
      pool.add(limited?.instances[0] ?? inst);
      this.opts.budget?.adjust(mv.name, w.instanceBytes);
    } else {
      const taken = await pool.retire();
      const w2 = this.wrapped.get(taken);
      w2?.unregister();
      // A configured instance retired under the rate limiter stays registered with it until unload (harmless: it never executes again).
      await mv.backend.removeInstance!(w2?.raw ?? taken);
      this.opts.budget?.adjust(mv.name, -w.instanceBytes);
    }
    this.history.push({ model: mv.name, delta, instances: pool.instances.length, atMs: performance.now() });
    trace(`'${mv.name}' ${delta > 0 ? 'gains' : 'loses'} an instance: ${pool.instances.length} now`);
  }
}
