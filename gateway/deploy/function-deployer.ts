// Config deploys: validate a whole bundle (zod, then every definition against
// the engine through the injected checkTarget) before anything changes, store
// it as a version, and swap the registry's definitions atomically. Rollback
// re-activates the previous version. Changes made by other replicas arrive
// through the store's watch() and are applied the same way.
//
// A store that lost its data (Redis restarted empty, FLUSHALL) is re-seeded
// by the first replica to notice: with the bundle it runs and the rollback
// history it last saw (each replica keeps a copy of the activation stack and
// its bundles, refreshed after every change it applies).
//
// Ownership: owns the snapshot of the active bundle it last applied and the
// saved copy of the store's history. The
// registry's replace() swaps one Map reference, and definitions are deep-
// frozen, so a call in flight keeps the definitions it started with.
// Event loop only; deploys are serialized by a SerialLock.
import { createHash } from 'node:crypto';
import { FunctionBundleSchema, FunctionDefinitionSchema, describeIssues, type FunctionDefinition } from '../calls/function-schema.ts';
import { gatewayLog as log } from '../../common/logger.ts';
import type { BundleSnapshot, BundleStore, VersionedBundle } from './bundle-store.ts';
import { SerialLock } from '../../common/serial-lock.ts';

/** What the deployer needs of the function registry. */
export interface DefinitionTarget {
  replace(definitions: FunctionDefinition[], version: string): void;
}

/** Thrown when a bundle is refused; `errors` lists every problem. */
export class BundleRefused extends Error {
  constructor(readonly errors: string[]) {
    super(`bundle refused: ${errors.length} error(s): ${errors.join('; ')}`);
  }
}

export interface DeployerOptions {
  store: BundleStore;
  registry: DefinitionTarget;
  /** Problems of one definition against the engine (target exists, inputs/outputs match); [] when it fits. */
  checkTarget(def: FunctionDefinition): Promise<string[]>;
}

/** A version name derived from the content: the same functions get the same name on every replica. */
export function contentVersion(functions: FunctionDefinition[]): string {
  return `sha-${createHash('sha256').update(JSON.stringify(functions)).digest('hex').slice(0, 12)}`;
}

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v as object)) deepFreeze(x);
  }
  return v;
}

export class FunctionDeployer {
  private current: VersionedBundle | undefined;
  /** The store's activation stack and bundles as last read: what a re-seed writes back. */
  private saved: BundleSnapshot | undefined;
  private readonly chain = new SerialLock();

  constructor(private readonly o: DeployerOptions) {}

  /** The bundle this gateway serves now (frozen). */
  get active(): VersionedBundle | undefined {
    return this.current;
  }

  /** Versions activated, oldest first (the last is active): the console's deploy history. */
  history(): Promise<string[]> {
    return this.o.store.history();
  }

  /** Seed the store with the local definitions if it is empty, apply the active bundle, follow changes. */
  async start(local: FunctionDefinition[], version?: string): Promise<VersionedBundle> {
    const seeded = await this.o.store.initialize({ version: version ?? contentVersion(local), functions: local });
    this.apply(seeded);
    await this.save();
    this.o.store.watch((v) => {
      if (v !== this.current?.version) void this.sync();
    });
    return seeded;
  }

  /**
   * Parse and check a whole bundle; returns it with its version, or every
   * problem found (each definition is parsed on its own, duplicates are named,
   * and every definition that parses is checked against the engine).
   */
  async validate(raw: unknown): Promise<{ bundle?: VersionedBundle; errors: string[] }> {
    const errors: string[] = [];
    const top = FunctionBundleSchema.safeParse(raw);
    if (top.success) return this.checkAll(top.data.functions, top.data.version, errors);
    const shape = raw as { version?: unknown; functions?: unknown } | null;
    if (!shape || typeof shape !== 'object' || !Array.isArray(shape.functions)) return { errors: describeIssues(top.error) };
    for (const i of top.error.issues) if (i.path[0] !== 'functions') errors.push(`${i.path.join('.') || '(root)'}: ${i.message}`);
    const defs: FunctionDefinition[] = [];
    const seen = new Set<string>();
    shape.functions.forEach((f, i) => {
      const p = FunctionDefinitionSchema.safeParse(f);
      if (!p.success) {
        errors.push(...describeIssues(p.error, `functions.${i}.`));
        return;
      }
      if (seen.has(p.data.name)) errors.push(`functions.${i}.name: duplicate function '${p.data.name}'`);
      seen.add(p.data.name);
      defs.push(p.data);
    });
    await this.checkAll(defs, undefined, errors, shape.functions as unknown[]);
    return { errors };
  }

  private async checkAll(defs: FunctionDefinition[], version: string | undefined, errors: string[], raw?: unknown[]) {
    const checks = await Promise.all(defs.map((d) => this.o.checkTarget(d).catch((e: Error) => [e.message])));
    checks.forEach((problems, k) => {
      const d = defs[k]!;
      const i = raw ? raw.findIndex((r) => (r as { name?: unknown })?.name === d.name) : k;
      for (const p of problems) errors.push(`functions.${i} (${d.name}): ${p}`);
    });
    if (errors.length) return { errors };
    return { bundle: { version: version ?? contentVersion(defs), functions: defs }, errors: [] };
  }

  /** Validate whole, store, swap. Throws BundleRefused (nothing changed) or BundleVersionConflict. */
  deploy(raw: unknown): Promise<VersionedBundle> {
    return this.serial(async () => {
      const { bundle, errors } = await this.validate(raw);
      if (!bundle) throw new BundleRefused(errors);
      await this.o.store.put(bundle);
      this.apply(bundle);
      await this.save();
      log.info(`deployed function bundle ${bundle.version} (${bundle.functions.length} functions)`);
      return this.current!;
    });
  }

  /** Re-activate the previous version; null when there is none. */
  rollback(): Promise<VersionedBundle | null> {
    return this.serial(async () => {
      const b = await this.o.store.rollback();
      if (b) {
        this.apply(b);
        await this.save();
        log.info(`rolled back to function bundle ${b.version}`);
      }
      return b ? this.current! : null;
    });
  }

  /** Apply the store's active bundle if it differs from ours (change notices, polls); re-seed an emptied store. */
  sync(): Promise<void> {
    return this.serial(async () => {
      let b = await this.o.store.active();
      const seed = !b && this.current ? this.reseedSnapshot() : undefined;
      if (seed && (await this.o.store.restore(seed))) {
        log.warn(
          `function bundle store was empty (Redis lost its data?); re-seeded it with bundle ${this.current!.version} and ${seed.history.length - 1} earlier activation(s) for rollback`,
        );
        b = await this.o.store.active();
      }
      if (b && b.version !== this.current?.version) {
        this.apply(b);
        log.info(`switched to function bundle ${b.version} (deployed by another replica)`);
      }
      if (b) await this.save();
    }).catch((e) => log.warn(`could not read the active function bundle: ${(e as Error).message}`));
  }

  /** Keep a copy of the store's history for a re-seed (best effort: the previous copy stays on failure). */
  private async save(): Promise<void> {
    this.saved = await this.o.store.snapshot().catch(() => this.saved);
  }

  /** What to write into an emptied store: the saved history, ending with the bundle this replica runs. */
  private reseedSnapshot(): BundleSnapshot {
    const cur = this.current!;
    const s = this.saved ?? { history: [], bundles: {} };
    const history = [...s.history];
    if (history.at(-1) !== cur.version) history.push(cur.version);
    // The store's own copy of a bundle first: the parsed one has defaults filled in, and
    // reusing its version for the raw content later would read as a conflict.
    return { history, bundles: { [cur.version]: cur.functions, ...s.bundles } };
  }

  private apply(b: VersionedBundle): void {
    // Re-parse: the store holds JSON, and this fills defaults the same way on every replica.
    const functions = b.functions.map((f) => deepFreeze(FunctionDefinitionSchema.parse(f)));
    this.current = deepFreeze({ version: b.version, functions });
    this.o.registry.replace(functions, b.version);
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    return this.chain.run(fn);
  }
}
