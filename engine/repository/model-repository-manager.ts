// over 300 lines: scan, load, unload, reload and shutdown all decide under one per-model lock and one model table
// The model repository manager (Triton's model_repository_manager): scans the
// repository, loads/unloads/reloads models under the control mode, and owns
// every loaded ModelVersion. Loads of one model are serialized; a reload
// builds the new versions fully before swapping, so requests in flight finish
// on the old ones and a failed reload keeps the old version serving.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ModelControl } from '../api/backend.ts';
import type { ModelIndexEntry, LoadParameters } from '../api/server-api.ts';
import type { SharedMemoryManager } from '../shm/shared-memory-manager.ts';
import { ModelEntryStatus, type ModelVersion } from './model-lifecycle.ts';
import { loadModelVersion } from './model-version-loader.ts';
import { RepositoryPoller } from './repository-poller.ts';
import { ensemblesInDependencyOrder } from './ensemble-load-order.ts';
import { backendNameOf, readRawConfig, versionsOnDisk, versionsToLoad } from '../config/model-config-loader.ts';
import { StatusError, internal, invalidArg, notFound, toStatusError, unavailable } from '../api/status.ts';
import { log } from '../../common/logger.ts';
import { SerialLock } from '../../common/serial-lock.ts';
import type { RateLimiter } from '../sharing/rate-limiter.ts';
import type { MemoryBudget } from '../sharing/model-memory-budget.ts';
import { budgetedLoad } from '../sharing/budgeted-load.ts';
import { DEFAULT_INSTANCE_LIMITS, instanceCount, type InstanceLimits } from './instance-limits.ts';
import { MemoryMonitor } from '../sharing/memory-monitor.ts';
import { budgetFields } from '../sharing/budget-index.ts';
import { trimAllocator } from '../sharing/process-memory.ts';
import { evictionCandidates, loadOnDemand } from '../sharing/on-demand-loading.ts';
import { checkModelName, echo } from './model-name.ts';

/** Triton's modes, and ours: 'on-demand' loads a model when a request for it arrives. */
export type ControlMode = 'none' | 'poll' | 'explicit' | 'on-demand';

export interface RepositoryOptions {
  repository: string;
  controlMode: ControlMode;
  /** --load-model (explicit mode); '*' = all. */
  startupModels: string[];
  strict: boolean;
  pollSecs: number;
  shm: SharedMemoryManager;
  /** Route a request through the target model's own scheduler (ensemble steps). */
  infer: (request: InferRequest) => Promise<InferResponse>;
  /** Model control for models that load others (python's pb_utils.load_model). */
  modelControl?: ModelControl;
  /** Per-backend settings handed to backends (--backend-config). */
  backendConfig?: Record<string, Record<string, string>>;
  /** --rate-limit=execution_count. */
  rateLimiter?: RateLimiter;
  /** --model-memory-budget: loads are charged against it (and evict idle models in on-demand mode). */
  budget?: MemoryBudget;
  /** --max-instances-per-model, --max-instances-total (instance-limits.ts). */
  instanceLimits?: Partial<InstanceLimits>;
  /** How often the memory monitor reads RSS (ms; default 500). */
  memoryMonitorMs?: number;
  /** On-demand mode: how long a request waits for its model to load. */
  onDemandTimeoutMs?: number;
  /** --exit-timeout-secs: how long an unload (and the whole shutdown) waits for in-flight requests (default 30 s). */
  exitTimeoutMs?: number;
  /** Fingerprint each version's files and config at load (the response cache keys on it). */
  fingerprintVersions?: boolean;
}

interface ModelEntry {
  name: string;
  versions: Map<number, ModelVersion>;
  /** State and reason reported for the model when no version is loaded. */
  readonly status: ModelEntryStatus;
  fingerprint?: string;
  /** Serializes load/unload of this model. */
  lock: SerialLock;
  /** Temp dir of a load with file overrides. */
  tmpDir?: string;
  /** Unloaded on request (not failed): readiness does not wait for it. */
  unloaded?: boolean;
}

/**
 * Triton's start check of --model-repository: a path that does not exist or
 * is no folder fails the server ("failed to stat file <path>", INTERNAL), so
 * a wrong mount or KServe storageUri fails its pod instead of serving
 * nothing. With --exit-on-error=false it is logged and the start goes on.
 */
export function checkRepositoryReadable(dir: string, exitOnError: boolean): void {
  let problem: string | undefined;
  try {
    if (!fs.statSync(dir).isDirectory()) problem = `model repository '${dir}' is not a directory`;
  } catch {
    problem = `failed to stat file ${dir}`;
  }
  if (!problem) return;
  if (exitOnError) throw internal(problem);
  log.error(`${problem}; starting without models (--exit-on-error=false)`);
}

export class ModelRepositoryManager {
  private readonly models = new Map<string, ModelEntry>();
  private readonly poller: RepositoryPoller;
  /** Models with a load under way (never evicted), and the shared load of each on-demand model. */
  readonly loading = new Set<string>();
  readonly pendingLoads = new Map<string, Promise<void>>();
  /** With a budget: keeps its books at what the models hold while they run. */
  readonly memoryMonitor: MemoryMonitor | undefined;

  constructor(private readonly opts: RepositoryOptions) {
    const budget = opts.budget;
    this.memoryMonitor = budget
      ? new MemoryMonitor({
          budget,
          versionsOf: (n) => [...(this.models.get(n)?.versions.values() ?? [])],
          candidates: () => evictionCandidates(this, budget, ''),
          evict: opts.controlMode === 'on-demand' ? (n) => this.evict(n) : undefined,
          intervalMs: opts.memoryMonitorMs,
        })
      : undefined;
    this.poller = new RepositoryPoller({
      repository: opts.repository,
      modelDirs: () => this.modelDirs(),
      entries: () => this.models,
      entry: (n) => this.entry(n),
      unload: (n) => this.unload(n),
      loadMany: (ns) => this.loadMany(ns),
    });
  }

  /** Load what the control mode says to load at startup. */
  async start(): Promise<void> {
    const { controlMode, startupModels } = this.opts;
    const names =
      (controlMode === 'explicit' || controlMode === 'on-demand') && !startupModels.includes('*') ? startupModels : this.modelDirs();
    this.memoryMonitor?.start();
    await this.loadMany(names);
    if (controlMode === 'poll') this.poller.start(this.opts.pollSecs);
  }

  /**
   * Load plain models first, in parallel, then ensembles in dependency order
   * (an ensemble whose step is another ensemble after it), as Triton does.
   */
  private async loadMany(names: string[]): Promise<void> {
    const steps = new Map<string, string[]>();
    for (const n of names) {
      try {
        const raw = readRawConfig(this.source(n));
        if (backendNameOf(raw) === 'ensemble')
          steps.set(
            n,
            (raw.ensemble_scheduling?.step ?? []).map((s) => s.model_name),
          );
      } catch {
        // Only orders the loads: an unreadable config fails that model's own load with the plain ones, with its reason.
      }
    }
    const plain = names.filter((n) => !steps.has(n));
    const settle = (n: string) => this.load(n).catch((e: unknown) => log.error(`failed to load '${n}': ${(e as Error).message}`));
    await Promise.all(plain.map(settle));
    for (const n of ensemblesInDependencyOrder(steps)) await settle(n);
  }

  async stop(): Promise<void> {
    this.poller.stop();
    this.memoryMonitor?.stop();
    // One exit timeout for the whole shutdown, as Triton's --exit-timeout-secs.
    const until = Date.now() + this.exitTimeoutMs;
    // Ensembles first: they hold requests on their composing models.
    const entries = [...this.models.values()].sort((a, b) => Number(this.isEnsembleEntry(b)) - Number(this.isEnsembleEntry(a)));
    for (const e of entries) {
      await this.withLock(e, () => this.unloadLocked(e, false, Math.max(0, until - Date.now()))).catch((err: unknown) =>
        log.error(`unload of '${e.name}' at shutdown failed`, err),
      );
    }
  }

  private get exitTimeoutMs(): number {
    return this.opts.exitTimeoutMs ?? 30_000;
  }

  private isEnsembleEntry(e: ModelEntry): boolean {
    return [...e.versions.values()].some((v) => v.config.platform === 'ensemble');
  }

  /** Model folder names in the repository. */
  modelDirs(): string[] {
    if (!fs.existsSync(this.opts.repository)) return [];
    return fs
      .readdirSync(this.opts.repository, { withFileTypes: true })
      .filter((d) => d.isDirectory() && !d.name.startsWith('.') && !d.name.startsWith('_'))
      .map((d) => d.name)
      .sort();
  }

  private entry(name: string): ModelEntry {
    let e = this.models.get(name);
    if (!e) this.models.set(name, (e = { name, versions: new Map(), status: new ModelEntryStatus(name), lock: new SerialLock() }));
    return e;
  }

  private source(name: string, overrideJson?: string, dir?: string) {
    return {
      modelName: name,
      modelDir: dir ?? path.join(this.opts.repository, name),
      repository: dir ? path.dirname(dir) : this.opts.repository,
      strict: this.opts.strict,
      overrideJson,
    };
  }

  private withLock<T>(e: ModelEntry, fn: () => Promise<T>): Promise<T> {
    return e.lock.run(fn);
  }

  /** Load or reload a model (all versions its policy selects). Throws with the reason on failure. */
  load(name: string, params: LoadParameters = {}): Promise<void> {
    checkModelName(name);
    const e = this.entry(name);
    return this.withLock(e, () => this.loadLocked(e, params));
  }

  private async loadLocked(e: ModelEntry, params: LoadParameters): Promise<void> {
    this.loading.add(e.name);
    try {
      await this.loadVersions(e, params);
    } finally {
      this.loading.delete(e.name);
    }
  }

  private async loadVersions(e: ModelEntry, params: LoadParameters): Promise<void> {
    const { name } = e;
    let dir = path.join(this.opts.repository, name);
    if (params.files && Object.keys(params.files).length) {
      if (params.config === undefined) throw invalidArg(`load of '${name}': file overrides need the 'config' parameter too`);
      dir = this.writeOverrideDir(e, params.files);
    } else if (!fs.existsSync(dir) && params.config === undefined) {
      this.models.delete(name);
      throw invalidArg(`failed to load '${name}', failed to poll from model repository`);
    }
    const src = this.source(name, params.config, dir === path.join(this.opts.repository, name) ? undefined : dir);
    const loaded: ModelVersion[] = [];
    try {
      const raw = readRawConfig(src);
      const rel = `${name}/config.pbtxt`;
      if (raw.platform === 'ensemble' && (this.opts.controlMode === 'explicit' || this.opts.controlMode === 'on-demand')) {
        // Triton loads an ensemble's composing models with it.
        for (const [i, s] of (raw.ensemble_scheduling?.step ?? []).entries()) {
          if (this.readyVersion(s.model_name)) continue;
          await this.load(s.model_name).catch((err: unknown) => {
            const se = toStatusError(err);
            throw new StatusError(
              se.code,
              `${rel}: ensemble '${name}': step[${i}] (model '${s.model_name}'): composing model failed to load: ${se.message}`,
              err,
            );
          });
        }
      }
      const versions = versionsToLoad(raw, versionsOnDisk(dir), rel);
      if (!versions.length) throw invalidArg(`${rel}: no version folder (e.g. ${name}/1/) to load`);
      const deps = {
        shm: this.opts.shm,
        infer: this.opts.infer,
        modelControl: this.opts.modelControl,
        rateLimiter: this.opts.rateLimiter,
        lookupConfig: (n: string, v: number) => this.readyVersion(n, v)?.config,
        backendConfig: this.opts.backendConfig,
        fingerprint: this.opts.fingerprintVersions,
        warmForBudget: this.opts.budget !== undefined,
        chargedBytes: this.opts.budget ? () => Math.round(this.opts.budget!.bytesOf(name)) : undefined,
        instances: () => ({
          limits: { ...DEFAULT_INSTANCE_LIMITS, ...this.opts.instanceLimits },
          others: this.instancesBesides(name),
          budgetBytes: this.opts.budget?.budgetBytes,
        }),
      };
      const loadAll = async () => {
        for (const v of versions) loaded.push(await loadModelVersion(src, raw, v, deps));
        return loaded;
      };
      const budget = this.opts.budget;
      if (!budget || raw.platform === 'ensemble') await loadAll();
      else {
        const onDemand = this.opts.controlMode === 'on-demand';
        await budgetedLoad(
          budget,
          {
            name,
            dir,
            versions,
            raw,
            waitMs: onDemand ? (this.opts.onDemandTimeoutMs ?? 30_000) : 0,
            candidates: () => evictionCandidates(this, budget, name),
            evict: onDemand ? (n) => this.evict(n) : undefined,
          },
          loadAll,
        );
      }
    } catch (err) {
      await Promise.all(
        loaded.map((v) =>
          v.unload().catch((ue: unknown) => log.warn(`unload of '${name}' v${v.version} after its failed load: ${(ue as Error).message}`)),
        ),
      );
      const se = toStatusError(err);
      // A StatusError's message was written for clients; anything else thrown while loading names its cause itself.
      const reason = err instanceof StatusError ? se.message : String((err as Error)?.message ?? err);
      if (e.versions.size === 0) {
        e.status.unavailable(reason);
        e.unloaded = false;
      } else {
        log.warn(`reload of '${name}' failed, previous version keeps serving: ${reason}`);
      }
      throw se.code === 'INTERNAL' ? new StatusError('INVALID_ARG', reason, err) : se;
    }
    const old = [...e.versions.values()];
    e.versions = new Map(loaded.map((v) => [v.version, v]));
    e.status.ready();
    e.unloaded = false;
    log.info(`successfully loaded '${name}' version ${loaded.map((v) => v.version).join(', ')}`);
    // Old versions drain their in-flight requests, then go.
    await Promise.all(old.map((v) => v.unload(this.exitTimeoutMs).catch((err) => log.error(`unload of '${name}' v${v.version}`, err))));
  }

  private writeOverrideDir(e: ModelEntry, files: Record<string, Uint8Array>): string {
    // Every path is checked before anything is created or removed on disk.
    const rels = Object.keys(files).map((key) => {
      // Keys are Triton's "file:<version>/<name>" (LoadParameters); the prefix is optional here. Leading
      // slashes name the model folder itself, as Triton's JoinPath appends "/1/model.py" to it.
      const rel = (key.startsWith('file:') ? key.slice('file:'.length) : key).replace(/^\/+/, '');
      if (!overridePathInside(rel)) throw invalidArg(`load of '${e.name}': file override '${echo(rel)}' escapes the model folder`);
      return [key, rel] as const;
    });
    if (e.tmpDir) fs.rmSync(e.tmpDir, { recursive: true, force: true });
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'engine-load-'));
    const dir = path.join(root, e.name);
    try {
      for (const [key, rel] of rels) {
        const target = path.resolve(dir, rel);
        fs.mkdirSync(path.dirname(target), { recursive: true });
        fs.writeFileSync(target, files[key]!);
      }
    } catch (err) {
      // A name past NAME_MAX, a full disk: Triton's answer, and our temp folder only in the log.
      log.error(`load of '${e.name}': writing its file overrides failed`, err);
      fs.rmSync(root, { recursive: true, force: true });
      throw internal(`failed to load '${e.name}', failed to poll from model repository`);
    }
    e.tmpDir = root;
    return dir;
  }

  /** Instances the loaded versions of every model but `name` hold. */
  private instancesBesides(name: string): number {
    let n = 0;
    for (const e of this.models.values()) if (e.name !== name) for (const v of e.versions.values()) n += instanceCount(v.config);
    return n;
  }

  /** Unload an idle model for the budget, atomically with the check (a request that got it first keeps it). */
  evict(name: string): Promise<boolean> {
    const e = this.models.get(name);
    if (!e) return Promise.resolve(false);
    return this.withLock(e, async () => {
      if (this.opts.budget?.inUse(name) || [...e.versions.values()].some((v) => v.scheduler.inflightCount() > 0) || e.versions.size === 0)
        return false;
      await this.unloadLocked(e, true);
      return true;
    });
  }

  /** On-demand mode: load `name` if it is in the repository and not loaded; concurrent callers share one load. */
  ensureLoaded(name: string, timeoutMs: number): Promise<void> {
    return loadOnDemand(this, name, timeoutMs);
  }

  /** Loaded entries (the on-demand helpers read them). */
  entries(): Iterable<{ name: string; versions: Map<number, ModelVersion> }> {
    return this.models.values();
  }

  /** Unload every version of a model; with unloadDependents, also the ensembles that use it. */
  async unload(name: string, opts: { unloadDependents?: boolean } = {}): Promise<void> {
    checkModelName(name);
    const e = this.models.get(name);
    if (!e) return;
    if (opts.unloadDependents) {
      for (const other of this.models.values()) {
        const uses = [...other.versions.values()].some((v) => v.config.ensemble_scheduling?.step.some((s) => s.model_name === name));
        if (uses) await this.unload(other.name, opts);
      }
    }
    await this.withLock(e, () => this.unloadLocked(e, false));
  }

  private async unloadLocked(e: ModelEntry, evicted: boolean, graceMs = this.exitTimeoutMs): Promise<void> {
    const old = [...e.versions.values()];
    e.versions = new Map();
    e.status.unavailable(evicted ? 'unloaded (evicted for the memory budget)' : 'unloaded');
    e.unloaded = true;
    for (const v of old) v.setState('UNLOADING');
    await Promise.all(old.map((v) => v.unload(graceMs)));
    this.opts.budget?.unloaded(e.name, evicted);
    if (this.opts.budget) trimAllocator();
    if (e.tmpDir) fs.rmSync(e.tmpDir, { recursive: true, force: true });
    e.tmpDir = undefined;
    log.info(`successfully unloaded '${e.name}'`);
  }

  /** The READY version to serve: the requested one, or the highest. */
  readyVersion(name: string, version?: number): ModelVersion | undefined {
    const e = this.models.get(name);
    if (!e) return undefined;
    if (version !== undefined && version >= 0) {
      const v = e.versions.get(version);
      return v?.state === 'READY' ? v : undefined;
    }
    // The highest READY version (a loop: every request without a version comes here).
    let best: ModelVersion | undefined;
    for (const v of e.versions.values()) if (v.state === 'READY' && (!best || v.version > best.version)) best = v;
    return best;
  }

  /** Like readyVersion, but throws Triton's errors. `version` is the wire string ('' = latest). */
  get(name: string, version?: string): ModelVersion {
    checkModelName(name);
    const e = this.models.get(name);
    if (!e || (e.versions.size === 0 && e.status.state !== 'UNAVAILABLE'))
      throw notFound(`Request for unknown model: '${name}' is not found`);
    let v: number | undefined;
    if (version) {
      v = Number(version);
      if (!Number.isInteger(v) || v < 0) throw invalidArg(`invalid model version '${version}' for '${name}'`);
    }
    const mv = this.readyVersion(name, v);
    if (mv) return mv;
    if (e.versions.size === 0)
      throw unavailable(`Request for unknown model: '${name}' has no available versions${e.status.reason ? `: ${e.status.reason}` : ''}`);
    throw unavailable(
      v !== undefined
        ? `Request for unknown model: '${name}' version ${v} is not at ready state`
        : `Request for unknown model: '${name}' has no available versions`,
    );
  }

  /** All loaded versions (statistics). */
  allVersions(): ModelVersion[] {
    return [...this.models.values()].flatMap((e) => [...e.versions.values()]);
  }

  /** Every model of the repository with its state (Triton's RepositoryIndex). */
  index(readyOnly: boolean): ModelIndexEntry[] {
    const names = new Set([...this.modelDirs(), ...this.models.keys()]);
    const out: ModelIndexEntry[] = [];
    for (const name of [...names].sort()) {
      const e = this.models.get(name);
      const books = budgetFields(this.opts.budget, name);
      if (e && e.versions.size) {
        for (const v of e.versions.values()) out.push({ name, version: String(v.version), state: v.state, reason: v.reason, ...books });
      } else {
        out.push({ name, version: '', state: e ? e.status.state : 'UNAVAILABLE', reason: e ? e.status.reason : 'not loaded', ...books });
      }
    }
    return readyOnly ? out.filter((m) => m.state === 'READY') : out;
  }

  /** True when every model the control mode meant to load is READY. */
  allReady(): boolean {
    return [...this.models.values()].every((e) => e.status.state === 'READY' || e.unloaded === true);
  }

  /** Poll mode: load new models, reload changed ones, unload removed ones. */
  poll(): Promise<void> {
    return this.poller.poll();
  }
}

/** True when a file override's relative path stays strictly inside its model folder. */
export function overridePathInside(rel: string): boolean {
  if (!rel || rel.includes('\0') || path.isAbsolute(rel)) return false;
  const base = path.resolve('/model');
  const target = path.resolve(base, rel);
  return target.startsWith(base + path.sep);
}
