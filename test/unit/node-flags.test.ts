// The engine's Node flags (engine/node-flags.ts) are spelled out in three
// more places that cannot import the list; this keeps them in step.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENGINE_NODE_FLAGS } from '../../engine/node-flags.ts';
import { childArgv, startArgs } from '../../scripts/start-args.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (p: string) => readFileSync(path.join(ROOT, p), 'utf8');

describe('engine Node flags', () => {
  it('npm start passes them before the engine script', () => {
    const { engine } = startArgs({});
    expect(engine.slice(0, ENGINE_NODE_FLAGS.length)).toEqual(ENGINE_NODE_FLAGS);
    expect(engine[ENGINE_NODE_FLAGS.length]).toBe('engine/main.ts');
  });

  it("npm run engine, engine:prod and the image's tritonserver command carry the same flags", () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    const tritonserver = read('deploy/docker/tritonserver');
    for (const f of ENGINE_NODE_FLAGS) {
      expect(scripts.engine).toContain(` ${f} engine/main.ts`);
      expect(scripts['engine:prod']).toContain(` ${f} dist/engine/main.js`);
      expect(tritonserver).toContain(` ${f} dist/engine/main.js`);
    }
  });

  it('compiled, npm start runs the children from dist/ without tsx', () => {
    const { engine, gateway } = startArgs({});
    const e = childArgv(engine, true);
    expect(e.slice(0, ENGINE_NODE_FLAGS.length)).toEqual(ENGINE_NODE_FLAGS);
    expect(e[ENGINE_NODE_FLAGS.length]).toBe('dist/engine/main.js');
    expect(childArgv(gateway, true)[0]).toBe('dist/gateway/main.js');
    expect([...e, ...childArgv(gateway, true)]).not.toContain('tsx');
    expect(childArgv(gateway, false).slice(0, 3)).toEqual(['--import', 'tsx', 'gateway/main.ts']);
  });
});
