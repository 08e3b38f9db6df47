// The one lifecycle helper (common/lifecycle.ts) and its users: model
// versions, python execution instances, region leases and async jobs move only along their tables and
// fail with one kind of error naming "from X to Y".
import { describe, expect, it } from 'vitest';
import { ENTRY_TRANSITIONS, MODEL_TRANSITIONS, ModelEntryStatus, ModelVersion } from '../../engine/repository/model-lifecycle.ts';
import { toStatusError } from '../../engine/api/status.ts';
import { transition as jobTransition } from '../../gateway/jobs/job-state.ts';
import { leaseTransition } from '../../gateway/staging/region-lease.ts';
import { checkTransition, IllegalTransition, Lifecycle } from '../../common/lifecycle.ts';
import { PythonInstance } from '../../engine/backends/python/python-instance.ts';
import { INSTANCE_TRANSITIONS } from '../../engine/backends/python/instance-state.ts';
import { ONNX_INSTANCE_TRANSITIONS } from '../../engine/backends/onnxruntime/onnxruntime-instance.ts';
import type { BackendContext } from '../../engine/api/backend.ts';

type S = 'a' | 'b' | 'c';
const TABLE = { a: ['b'], b: ['c', 'a'], c: [] } as const satisfies Record<S, readonly S[]>;

describe('Lifecycle', () => {
  it('moves along the table and refuses anything else with IllegalTransition', () => {
    const l = new Lifecycle<S>(TABLE, 'a', 'thing t');
    expect(l.can('c')).toBe(false);
    expect(l.to('b')).toBe('b');
    expect(l.to('c')).toBe('c');
    let err: unknown;
    try {
      l.to('a');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(IllegalTransition);
    expect((err as IllegalTransition).code).toBe('INTERNAL');
    expect((err as Error).message).toBe('thing t: illegal transition from c to a');
    expect(l.state).toBe('c');
    expect(() => checkTransition<S>(TABLE, 'x', 'a', 'c')).toThrow('x: illegal transition from a to c');
  });

  it('keeps the state private: no assignment from outside', () => {
    const l = new Lifecycle<S>(TABLE, 'a', 't');
    expect(() => {
      (l as unknown as { state: S }).state = 'c';
    }).toThrow(TypeError);
    const mv = new ModelVersion('m', 1, {} as never, {} as never, {} as never, {} as never);
    expect(() => {
      (mv as unknown as { state: string }).state = 'READY';
    }).toThrow(TypeError);
    expect(mv.state).toBe('UNKNOWN');
  });

  it('models, leases and jobs all throw the same kind', () => {
    const mv = new ModelVersion('m', 1, {} as never, {} as never, {} as never, {} as never);
    expect(() => mv.setState('READY')).toThrow(IllegalTransition);
    expect(() => mv.setState('READY')).toThrow("model 'm' version 1: illegal transition from UNKNOWN to READY");
    expect(() => leaseTransition('r', 'released', 'held')).toThrow(IllegalTransition);
    expect(() => jobTransition('delivered', 'running', 'j')).toThrow(IllegalTransition);
    expect(MODEL_TRANSITIONS.READY).toEqual(['UNLOADING']);
  });

  it('the engine reports an illegal move as INTERNAL naming it', () => {
    const se = toStatusError(new IllegalTransition('w', 'X', 'Y'));
    expect(se.code).toBe('INTERNAL');
    expect(se.message).toBe('w: illegal transition from X to Y');
  });
});

describe('python execution instance lifecycle', () => {
  const ctx = {
    modelName: 'pm',
    version: 1,
    modelDir: '/nowhere/pm',
    versionDir: '/nowhere/pm/1',
    config: { name: 'pm', max_batch_size: 0, input: [], output: [] },
  } as unknown as BackendContext;
  const instance = (interpreter: string) =>
    new PythonInstance('pm_0', ctx, {
      interpreter,
      modelFile: '/nowhere/pm/1/model.py',
      prefix: `/tpy.lifecycle.${process.pid}`,
      kind: 'KIND_CPU',
      deviceId: 0,
    });

  it('moves along its table; an illegal move is INTERNAL naming it', () => {
    const l = new Lifecycle(INSTANCE_TRANSITIONS, 'STOPPED', "python instance pm_0 of model 'pm'");
    l.to('STARTING');
    l.to('READY');
    l.to('CLOSED');
    expect(() => l.to('STARTING')).toThrow("python instance pm_0 of model 'pm': illegal transition from CLOSED to STARTING");
    expect(toStatusError(new IllegalTransition('w', 'STOPPED', 'READY')).code).toBe('INTERNAL');
    expect(INSTANCE_TRANSITIONS.STOPPED).not.toContain('READY');
    // An onnxruntime instance: a dead worker is respawned, a closed one never.
    const o = new Lifecycle(ONNX_INSTANCE_TRANSITIONS, 'RUNNING', "instance m_0 of model 'm'");
    o.to('DEAD');
    o.to('RUNNING');
    o.to('CLOSED');
    expect(() => o.to('RUNNING')).toThrow("instance m_0 of model 'm': illegal transition from CLOSED to RUNNING");
  });

  it('a stub that never spawns is told by its exit kind, not its text: the reason is the spawn error itself', async () => {
    const pi = instance('/nonexistent/python3-for-lifecycle-test');
    expect(pi.state).toBe('STOPPED');
    await expect(pi.start()).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: "python interpreter '/nonexistent/python3-for-lifecycle-test' not found",
    });
    expect(pi.state).toBe('STOPPED');
    await pi.close();
    expect(pi.state).toBe('CLOSED');
    // Closed for good: a start now is refused as an unloaded model, never an illegal move.
    await expect(pi.start()).rejects.toMatchObject({ code: 'UNAVAILABLE', message: "model 'pm' was unloaded before this request ran" });
    expect(pi.state).toBe('CLOSED');
  });
});

describe("a model entry's own state", () => {
  it('moves through ready() and unavailable() only, keeping the reason with it', () => {
    const st = new ModelEntryStatus('m');
    expect([st.state, st.reason]).toEqual(['UNKNOWN', '']);
    st.unavailable('bad config');
    expect([st.state, st.reason]).toEqual(['UNAVAILABLE', 'bad config']);
    st.ready();
    expect([st.state, st.reason]).toEqual(['READY', '']);
    expect(() => {
      (st as unknown as { state: string }).state = 'UNKNOWN';
    }).toThrow(TypeError);
    expect(ENTRY_TRANSITIONS.READY).not.toContain('UNKNOWN');
    expect(() => checkTransition(ENTRY_TRANSITIONS, "model 'm'", 'READY', 'UNKNOWN')).toThrow(
      "model 'm': illegal transition from READY to UNKNOWN",
    );
  });
});
