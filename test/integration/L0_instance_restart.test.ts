// An execution instance whose worker thread dies fails only the requests it
// held; the next request on it restarts the session and succeeds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from 'node:worker_threads';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';

let dir: string;
let eng: RunningEngine;

const request = (a: number): InferRequest => ({
  modelName: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Uint8Array(Int32Array.from({ length: 16 }, () => a).buffer) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Uint8Array(Int32Array.from({ length: 16 }, () => 1).buffer) },
  ],
  outputs: [{ name: 'OUTPUT0' }],
  parameters: {},
});

beforeAll(async () => {
  dir = tempRepo('l0-restart', ['simple']);
  eng = await startTestEngine({ modelRepository: dir });
});
afterAll(async () => {
  await eng?.stop();
  removeDir(dir);
});

describe('L0_instance_restart', () => {
  it('restarts a crashed instance worker on its next request', async () => {
    const mv = eng.engine.repository.readyVersion('simple')!;
    const workers = mv.backend.instances.map((i) => (i as unknown as { worker: Worker }).worker);
    expect(workers.length).toBeGreaterThan(0);
    // Kill every instance's thread for real: the model has no live session left.
    await Promise.all(workers.map((w) => w.terminate()));
    const res = await eng.server.infer(request(41));
    const out = new Int32Array(Uint8Array.from(res.outputs[0]!.data).buffer);
    expect(Array.from(out)).toEqual(Array.from({ length: 16 }, () => 42));
    const now = mv.backend.instances.map((i) => (i as unknown as { worker: Worker }).worker);
    expect(now.some((w, i) => w !== workers[i])).toBe(true);
    expect(eng.server.isModelReady('simple')).toBe(true);
  });
});
