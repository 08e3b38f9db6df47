// onnxruntime-node's install script fetches CUDA binaries from outside the npm
// registry on linux/x64; CPU hosts skip it. npm 11 warns that an unknown key
// in the project .npmrc (`onnxruntime-node-install=skip`, the old way) "will
// stop working in the next major version", so the skip is also npm's own install
// script policy: `allowScripts` in package.json denies that one script, and the
// .npmrc key stays for the npm versions that still pass it on.
// A GPU host runs it on purpose (docs/deploy/gpu-hosts.md).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
// Without the npm_* variables an enclosing `npm test` exports (its whole config, as env): the project's own files decide.
const npm = (args: string[], env: NodeJS.ProcessEnv = {}) => {
  const clean = Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([k]) => !/^npm_/i.test(k)));
  delete clean.ONNXRUNTIME_NODE_INSTALL;
  const r = spawnSync('npm', args, { cwd: ROOT, encoding: 'utf8', env: clean, timeout: 120_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
};

describe('npm configuration', () => {
  it('the project .npmrc keeps onnxruntime-node-install=skip (read by the script itself when npm passes it on)', () => {
    // Kept as the project's documented switch; npm 11 warns that unknown project keys will stop being passed
    // on, which is why the allowScripts policy below denies the script as well: either one alone stops the download.
    expect(fs.readFileSync(path.join(ROOT, '.npmrc'), 'utf8')).toMatch(/^onnxruntime-node-install=skip$/m);
    const r = npm(['config', 'list']);
    expect(r.status).toBe(0);
  });

  it("onnxruntime-node's download script is denied by the install-script policy, so a CPU host installs with no download", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.allowScripts['onnxruntime-node']).toBe(false);
    // A proxy nobody listens on: had the script run, its download would fail and so would the rebuild.
    const r = npm(['rebuild', 'onnxruntime-node', '--foreground-scripts'], {
      GLOBAL_AGENT_HTTPS_PROXY: 'http://127.0.0.1:9',
      GLOBAL_AGENT_HTTP_PROXY: 'http://127.0.0.1:9',
    });
    expect(r.out).not.toMatch(/node \.\/script\/install/);
    expect(r.status, r.out).toBe(0);
  }, 130_000);

  it('every other dependency install script is reviewed, so npm ci lists none as pending', () => {
    const r = npm(['approve-scripts', '--allow-scripts-pending']);
    expect(r.out).toMatch(/No packages with unreviewed install scripts/);
  }, 130_000);
});
