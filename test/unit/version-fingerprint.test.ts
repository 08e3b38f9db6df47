// A version's fingerprint: the same files and config anywhere give the same
// one; any byte of the version's files, the model folder's own files or the
// config changes it; other versions and __pycache__ do not.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fingerprintVersion } from '../../engine/repository/version-fingerprint.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const config = { name: 'm', max_batch_size: 0, input: [], output: [] } as ModelConfig;

function model(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'fp-'));
  dirs.push(root);
  const dir = path.join(root, 'm');
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), text);
  }
  return dir;
}
const fp = (dir: string, c = config) => fingerprintVersion(dir, path.join(dir, '1'), c);
const BASE = { 'config.pbtxt': 'name: "m"', 'labels.txt': 'a\nb', '1/model.py': 'x = 1', '1/lib/util.py': 'y = 2' };

describe('fingerprintVersion', () => {
  it('is the same for the same files and config in another folder', async () => {
    expect(await fp(model(BASE))).toBe(await fp(model(BASE)));
  });

  it("changes with any byte of the version's files, the model folder's files, or the config", async () => {
    const a = await fp(model(BASE));
    expect(await fp(model({ ...BASE, '1/model.py': 'x = 2' }))).not.toBe(a);
    expect(await fp(model({ ...BASE, '1/lib/util.py': 'y = 3' }))).not.toBe(a);
    expect(await fp(model({ ...BASE, 'labels.txt': 'a\nc' }))).not.toBe(a);
    expect(await fp(model({ ...BASE, '1/extra.bin': '' }))).not.toBe(a);
    expect(await fp(model(BASE), { ...config, max_batch_size: 4 })).not.toBe(a);
  });

  it('leaves out other versions and __pycache__', async () => {
    const a = await fp(model(BASE));
    expect(await fp(model({ ...BASE, '2/model.py': 'x = 99', '1/__pycache__/model.cpython-311.pyc': 'junk' }))).toBe(a);
  });
});
