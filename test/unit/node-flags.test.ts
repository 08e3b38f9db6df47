// The engine's Node flags (engine/node-flags.ts) are spelled out in three
// more places that cannot import the list; this keeps them in step.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENGINE_NODE_FLAGS } from '../../engine/node-flags.ts';
import { startArgs } from '../../scripts/start-args.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (p: string) => readFileSync(path.join(ROOT, p), 'utf8');

describe('engine Node flags', () => {
  it('npm start passes them before the engine script', () => {
    const { engine } = startArgs({});
    expect(engine.slice(0, ENGINE_NODE_FLAGS.length)).toEqual(ENGINE_NODE_FLAGS);
    expect(engine[ENGINE_NODE_FLAGS.length]).toBe('engine/main.ts');
  });

  it('npm run engine and the image\'s tritonserver command carry the same flags', () => {
    const script = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.engine!;
    const tritonserver = read('deploy/docker/tritonserver');
    for (const f of ENGINE_NODE_FLAGS) {
      expect(script).toContain(` ${f} engine/main.ts`);
      expect(tritonserver).toContain(` ${f} engine/main.ts`);
    }
  });
});
