// A python model's pb_utils.load_model / unload_model / is_model_ready: the
// stub's `model_control` frame served through the engine's model control
// (the repository API's rules: explicit mode, config and file overrides) and
// answered with a `model_control_reply`. A load may come from initialize (as
// in Triton): loads lock per model, so loading another model from a model's
// initialize does not wait on itself.
import type { BackendContext } from '../../api/backend.ts';
import { toStatusError, unsupported } from '../../api/status.ts';
import type { EngineFrame, StubFrameOf } from './stub-frames.ts';

/** Serve `m` and send its reply with `reply`; never throws (a failure is the reply's error text). */
export function serveModelControl(
  m: StubFrameOf<'model_control'>,
  ctx: Pick<BackendContext, 'modelControl' | 'modelName'>,
  reply: (f: EngineFrame) => void,
): void {
  const answer = async (): Promise<{ ready?: boolean }> => {
    const mc = ctx.modelControl;
    if (!mc) throw unsupported(`model control is not available to model '${ctx.modelName}'`);
    switch (m.op) {
      case 'load': {
        const files = m.files
          ? Object.fromEntries(Object.entries(m.files).map(([k, v]) => [k, new Uint8Array(Buffer.from(v, 'base64'))]))
          : undefined;
        await mc.loadModel(m.model, { ...(m.config ? { config: m.config } : {}), ...(files ? { files } : {}) });
        return {};
      }
      case 'unload':
        await mc.unloadModel(m.model, { unloadDependents: m.unload_dependents === true });
        return {};
      case 'is_ready':
        return { ready: mc.isModelReady(m.model, m.version || undefined) };
      default:
        throw unsupported(`unknown model control operation '${String(m.op)}'`);
    }
  };
  answer().then(
    (r) => reply({ t: 'model_control_reply', cid: m.cid, ...r }),
    (err: unknown) => reply({ t: 'model_control_reply', cid: m.cid, error: toStatusError(err).message }),
  );
}
