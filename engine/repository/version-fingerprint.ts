// The identity of a loaded model version's code and data: a SHA-256 over its
// normalized config and the bytes of every file it is loaded from (the
// version folder, recursively, and the model folder's own files such as
// config.pbtxt and label files; not the other versions). Taken at load, before
// the backend reads the files, when the engine has a response cache: the
// cache keys on it, so a version reloaded with new code under the same name
// and number never answers from the old code's entries, while engines that
// load the same files share their Redis entries. What the files import from
// elsewhere (a python environment, site-packages) is not part of it.
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ModelConfig } from '../api/model-config.ts';

/** Folders that hold caches of the files, not files of the model. */
const SKIP_DIRS = new Set(['__pycache__', '.git']);

/** Hex SHA-256 of `config` and the files of `versionDir` and of `modelDir` itself. */
export async function fingerprintVersion(modelDir: string, versionDir: string, config: ModelConfig): Promise<string> {
  const h = createHash('sha256');
  const field = (s: string) => h.update(`${Buffer.byteLength(s)}:${s};`);
  field(JSON.stringify(config));
  for (const ent of await sortedEntries(modelDir)) {
    if (ent.isFile() || ent.isSymbolicLink()) await hashFile(h, field, path.join(modelDir, ent.name), ent.name);
  }
  await hashTree(h, field, versionDir, path.basename(versionDir));
  return h.digest('hex');
}

async function sortedEntries(dir: string) {
  const ents = await fs.readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  return ents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function hashTree(h: Hash, field: (s: string) => void, dir: string, rel: string): Promise<void> {
  for (const ent of await sortedEntries(dir)) {
    const p = path.join(dir, ent.name);
    const r = `${rel}/${ent.name}`;
    const st = await fs.stat(p).catch(() => undefined); // a dangling link is not part of the model
    if (!st) continue;
    if (st.isDirectory()) {
      if (!SKIP_DIRS.has(ent.name)) await hashTree(h, field, p, r);
    } else if (st.isFile()) await hashFile(h, field, p, r);
  }
}

async function hashFile(h: Hash, field: (s: string) => void, file: string, rel: string): Promise<void> {
  const st = await fs.stat(file).catch(() => undefined); // gone or unreadable: not part of the version's files
  if (!st?.isFile()) return;
  field(rel);
  field(String(st.size));
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
}
