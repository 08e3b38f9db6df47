// Where deployed function bundles live: every version by name, plus the stack
// of activations (deploying pushes a version, rollback pops back to the one
// active before). The top of the stack is the active bundle. Two
// implementations share this contract: MemoryBundleStore (one process) and
// RedisBundleStore (shared by replicas, with pub/sub change notices).
import type { FunctionDefinition } from '../calls/function-schema.ts';

/** A bundle with its version fixed (the form GET /admin/functions returns and PUT accepts). */
export interface VersionedBundle {
  version: string;
  functions: FunctionDefinition[];
}

/** The activation stack with the bundle of each version in it: what rollback needs, kept to re-seed an emptied store. */
export interface BundleSnapshot {
  /** Oldest first; the last is active. */
  history: string[];
  /** The functions of every version in `history`. */
  bundles: Record<string, FunctionDefinition[]>;
}

/** Thrown when a version name is reused for different content. */
export class BundleVersionConflict extends Error {
  constructor(readonly version: string) {
    super(`version '${version}' is already deployed with different content`);
  }
}

export interface BundleStore {
  readonly kind: 'memory' | 'redis';
  /** The active bundle, or null before the first deploy. */
  active(): Promise<VersionedBundle | null>;
  /** The activation stack, oldest first (the last is active). */
  history(): Promise<string[]>;
  /** Store (or reuse an identical) version and make it active. Throws BundleVersionConflict. */
  put(bundle: VersionedBundle): Promise<void>;
  /** Put only if nothing is active yet (first gateway to start seeds the store); returns the active bundle. */
  initialize(bundle: VersionedBundle): Promise<VersionedBundle>;
  /** Re-activate the version active before the current one; null when there is none (nothing changes). */
  rollback(): Promise<VersionedBundle | null>;
  /** The activation stack and its bundles (the deployer keeps a copy to re-seed an emptied store). */
  snapshot(): Promise<BundleSnapshot>;
  /** Write `s` whole if the store holds no activation (it lost its data); true when written. Atomic across replicas. */
  restore(s: BundleSnapshot): Promise<boolean>;
  /**
   * Call `onChange(version)` when another writer (or this one) changes the
   * active version, and `onChange(null)` when a check finds no active version
   * at all (the store lost its data).
   */
  watch(onChange: (version: string | null) => void): void;
  close(): Promise<void>;
}

/** How many activations are remembered for rollback. */
export const HISTORY_LIMIT = 50;

export const bundleJson = (b: VersionedBundle) => JSON.stringify(b.functions);

/** Bundles in this process only (no Redis): versions are lost on restart. Event loop only. */
export class MemoryBundleStore implements BundleStore {
  readonly kind = 'memory' as const;
  private readonly bundles = new Map<string, string>();
  private stack: string[] = [];
  private listeners: Array<(v: string | null) => void> = [];

  async active(): Promise<VersionedBundle | null> {
    const v = this.stack.at(-1);
    return v === undefined ? null : { version: v, functions: JSON.parse(this.bundles.get(v)!) };
  }

  async history(): Promise<string[]> {
    return [...this.stack];
  }

  async put(b: VersionedBundle): Promise<void> {
    const json = bundleJson(b);
    const prev = this.bundles.get(b.version);
    if (prev !== undefined && prev !== json) throw new BundleVersionConflict(b.version);
    this.bundles.set(b.version, json);
    if (this.stack.at(-1) !== b.version) this.stack.push(b.version);
    this.stack = this.stack.slice(-HISTORY_LIMIT);
    this.notify(b.version);
  }

  async initialize(b: VersionedBundle): Promise<VersionedBundle> {
    if (!this.stack.length) await this.put(b);
    return (await this.active())!;
  }

  async snapshot(): Promise<BundleSnapshot> {
    return { history: [...this.stack], bundles: Object.fromEntries(this.stack.map((v) => [v, JSON.parse(this.bundles.get(v)!)])) };
  }

  async restore(s: BundleSnapshot): Promise<boolean> {
    if (this.stack.length || !s.history.length) return false;
    for (const v of s.history) this.bundles.set(v, JSON.stringify(s.bundles[v]));
    this.stack = s.history.slice(-HISTORY_LIMIT);
    this.notify(this.stack.at(-1)!);
    return true;
  }

  async rollback(): Promise<VersionedBundle | null> {
    if (this.stack.length < 2) return null;
    this.stack.pop();
    const a = (await this.active())!;
    this.notify(a.version);
    return a;
  }

  watch(onChange: (version: string | null) => void): void {
    this.listeners.push(onChange);
  }

  async close(): Promise<void> {
    this.listeners = [];
  }

  private notify(v: string): void {
    for (const l of this.listeners) l(v);
  }
}
