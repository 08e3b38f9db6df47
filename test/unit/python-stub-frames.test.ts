// The python stub protocol's frame kinds are named on both sides: typed
// unions in engine/backends/python/stub-frames.ts, constants in
// stub_frames.py that stub.py writes and dispatches on. This imports the
// Python module with the real interpreter and checks that both sides list
// exactly the same kinds in each direction, and that stub.py itself spells no
// kind as a bare string (so a kind added there must go through the list).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENGINE_FRAME_KINDS, STUB_FRAME_KINDS } from '../../engine/backends/python/stub-frames.ts';
import { STUB_PATH } from '../../engine/backends/python/stub-process.ts';

const DIR = path.dirname(STUB_PATH);

function pythonKinds(): { engine: string[]; stub: string[] } {
  const code = 'import json, stub_frames as F; print(json.dumps({"engine": list(F.ENGINE_FRAMES), "stub": list(F.STUB_FRAMES)}))';
  return JSON.parse(execFileSync('python3', ['-c', code], { cwd: DIR, encoding: 'utf8' })) as { engine: string[]; stub: string[] };
}

describe('python stub frame kinds', () => {
  it('are the same on the Python side and in the TypeScript unions, direction by direction', () => {
    const py = pythonKinds();
    expect(py.engine).toEqual([...ENGINE_FRAME_KINDS]);
    expect(py.stub).toEqual([...STUB_FRAME_KINDS]);
    expect(new Set([...py.engine, ...py.stub]).size).toBe(py.engine.length + py.stub.length);
  });

  it('stub.py and stub_channel.py name every kind through stub_frames, never as a bare string', () => {
    const src = readFileSync(STUB_PATH, 'utf8') + readFileSync(path.join(path.dirname(STUB_PATH), 'stub_channel.py'), 'utf8');
    const bare = [...src.matchAll(/"t":\s*"([a-z_]+)"|\[\s*"t"\s*\]\s*==\s*"([a-z_]+)"|\bt\s*==\s*"([a-z_]+)"/g)].map(
      (m) => m[1] ?? m[2] ?? m[3],
    );
    expect(bare).toEqual([]);
    for (const kind of [...ENGINE_FRAME_KINDS, ...STUB_FRAME_KINDS]) {
      const constant = kind.toUpperCase();
      expect(src, `the stub uses F.${constant}`).toContain(`F.${constant}`);
    }
  });
});
