// Poll mode of the model repository (Triton's --model-control-mode=poll):
// every poll interval, fingerprint each model folder and have the manager
// load new models, reload changed ones and unload removed ones. Owns only the
// timer and the one-poll-at-a-time flag; model state stays in the manager.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { log } from '../../common/logger.ts';

/** The part of a model's record the poller reads and writes. */
export interface PolledEntry {
  fingerprint?: string;
  /** Set when the model was loaded from override files: not unloaded for a missing folder. */
  tmpDir?: string;
}

/** What the poller asks of the repository manager. */
export interface PollTarget {
  repository: string;
  modelDirs(): string[];
  /** Every model the manager knows, by name. */
  entries(): Iterable<[string, PolledEntry]>;
  /** The model's record, created if new. */
  entry(name: string): PolledEntry;
  unload(name: string): Promise<void>;
  loadMany(names: string[]): Promise<void>;
}

/** A fingerprint of a model folder's files (names, sizes, mtimes). */
export function fingerprintModelDir(dir: string): string {
  const h = crypto.createHash('sha1');
  const walk = (d: string) => {
    if (!fs.existsSync(d)) return;
    for (const ent of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(d, ent.name);
      if (ent.isDirectory()) walk(p);
      else {
        const st = fs.statSync(p);
        h.update(`${p}:${st.size}:${st.mtimeMs}\n`);
      }
    }
  };
  walk(dir);
  return h.digest('hex');
}

/** The poll timer of one repository; poll() never runs twice at once. */
export class RepositoryPoller {
  private timer?: NodeJS.Timeout;
  private polling = false;

  constructor(private readonly target: PollTarget) {}

  /** Record the current fingerprints, then poll every `pollSecs` (at least 1 s). */
  start(pollSecs: number): void {
    for (const n of this.target.modelDirs()) this.target.entry(n).fingerprint = this.fingerprint(n);
    this.timer = setInterval(() => void this.poll(), Math.max(1, pollSecs) * 1000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private fingerprint(name: string): string {
    return fingerprintModelDir(path.join(this.target.repository, name));
  }

  /** Load new models, reload changed ones, unload removed ones. */
  async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const dirs = new Set(this.target.modelDirs());
      for (const [name, e] of this.target.entries()) {
        if (!dirs.has(name) && !e.tmpDir)
          await this.target
            .unload(name)
            .catch((err: unknown) => log.warn(`poll: unload of removed '${name}' failed: ${(err as Error).message}`));
      }
      const changed: string[] = [];
      for (const name of dirs) {
        const fp = this.fingerprint(name);
        const e = this.target.entry(name);
        if (e.fingerprint !== fp) {
          e.fingerprint = fp;
          changed.push(name);
        }
      }
      if (changed.length) {
        log.info(`poll: reloading ${changed.join(', ')}`);
        await this.target.loadMany(changed);
      }
    } finally {
      this.polling = false;
    }
  }
}
