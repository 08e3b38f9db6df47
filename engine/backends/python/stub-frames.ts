// The python stub protocol's frames, typed: what the engine sends a stub
// (EngineFrame) and what a stub sends back (StubFrame), each a union keyed by
// its kind `t`. Framing is frame-codec.ts's; the Python side names the same
// kinds in stub_frames.py, and test/unit/python-stub-frames.test.ts checks
// that both sides list exactly the same ones.
import type { ParamValue } from '../../api/infer-request.ts';
import type { WireTensor } from './tensor-transfer.ts';

/** The kinds the engine sends, in stub_frames.py's order. */
export const ENGINE_FRAME_KINDS = [
  'autocomplete',
  'init',
  'exec',
  'fini',
  'is_ready',
  'bls_reply',
  'cancel',
  'model_control_reply',
] as const;
/** The kinds a stub sends, in stub_frames.py's order. */
export const STUB_FRAME_KINDS = [
  'init_error',
  'config',
  'ready',
  'exec_done',
  'resp',
  'bls',
  'is_ready_reply',
  'fini_done',
  'bls_cancel',
  'hello',
  'model_control',
] as const;

/** One request of an `exec` frame. */
export interface ExecRequest {
  id: string;
  correlation_id: string | number | boolean;
  parameters: Record<string, string | number | boolean>;
  outputs: string[];
  inputs: WireTensor[];
}

/** A bls_reply's body: the outputs (and the response's parameters), or the error and its code. */
export type BlsReplyBody = ({ outputs: WireTensor[]; parameters?: Record<string, ParamJson> } | { error: string; code: string }) & {
  /** A decoupled BLS call's responses: 1 (final) on its last reply; a reply without flags is the only one. */
  flags?: number;
};

/** A parameter value as JSON carries it (an int64 past 2^53 as its decimal text). */
export type ParamJson = string | number | boolean | { int64: string };

/** A response: its outputs, or the error a model returned for it. */
export interface ResponseBody {
  outputs?: WireTensor[];
  error?: { message: string; code: string };
  /** InferenceResponse(parameters=...): checked by the stub (str keys; bool, int or str values). */
  parameters?: Record<string, ParamJson>;
}

export type EngineFrame =
  /** Run the model class's auto_complete_config on `config`. */
  | { t: 'autocomplete'; config: object; model_dir: string }
  /** Construct the model and call initialize(args) (Triton's keys, all strings). */
  | { t: 'init'; args: Record<string, string> }
  /** Run execute() on one batch. */
  | { t: 'exec'; seq: number; model: string; requests: ExecRequest[] }
  /** Call finalize() and exit. */
  | { t: 'fini' }
  /** Ask the model's is_ready(). */
  | { t: 'is_ready'; rid: number }
  /** The answer to a stub's `bls` call (a decoupled call gets one per response). */
  | ({ t: 'bls_reply'; bid: number } & BlsReplyBody)
  /** The client cancelled request `index` of batch `seq`: its is_cancelled() turns true. */
  | { t: 'cancel'; seq: number; index: number }
  /** The answer to a stub's `model_control` call: done (with `ready` for is_ready), or the error's text. */
  | { t: 'model_control_reply'; cid: number; ready?: boolean; error?: string };

export type StubFrame =
  /** initialize() or auto_complete_config failed, or numpy is missing (`kind`). */
  | { t: 'init_error'; kind: 'numpy' | 'python'; message: string }
  /** auto_complete_config's answer (null when the class has none). */
  | { t: 'config'; config: Record<string, unknown> | null }
  /** initialize() returned. */
  | { t: 'ready'; has_is_ready: boolean }
  /**
   * execute() returned: per request its returned body, or null where the model answers through
   * its response sender (none for a decoupled model); or why it raised (`raw`: Triton's text, sent as is).
   */
  | { t: 'exec_done'; seq: number; responses?: Array<ResponseBody | null>; error?: string; raw?: boolean }
  /** A response (or just flags) sent through request `index`'s response sender, batch `seq`. */
  | ({ t: 'resp'; seq: number; index: number; flags: number; has_response: boolean } & ResponseBody)
  /** A BLS call from inside execute() (`decoupled`: exec(decoupled=True), every response wanted). */
  | {
      t: 'bls';
      bid: number;
      model: string;
      version: number;
      id: string;
      outputs: string[];
      parameters: Record<string, ParamValue>;
      inputs: WireTensor[];
      decoupled?: boolean;
      timeout?: number;
    }
  /** The model's is_ready() answer (`error`: why it counts as not ready). */
  | { t: 'is_ready_reply'; rid: number; ready: boolean; error?: string }
  /** finalize() returned; the process exits next. */
  | { t: 'fini_done' }
  /** The model cancelled its BLS call `bid` (a response iterator's cancel()). */
  | { t: 'bls_cancel'; bid: number }
  /** The stub is up and reads its channel (Triton's pre-initialization step, bounded by stub-timeout-seconds). */
  | { t: 'hello' }
  /**
   * pb_utils.load_model / unload_model / is_model_ready: `files` maps "file:<v>/<name>" to base64
   * contents; `version` for is_ready ("" any).
   */
  | {
      t: 'model_control';
      cid: number;
      op: 'load' | 'unload' | 'is_ready';
      model: string;
      config?: string;
      files?: Record<string, string>;
      unload_dependents?: boolean;
      version?: string;
    };

export type EngineFrameKind = (typeof ENGINE_FRAME_KINDS)[number];
export type StubFrameKind = (typeof STUB_FRAME_KINDS)[number];

// The unions and the kind lists name the same kinds (a compile error otherwise).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const engineKindsMatch: Same<EngineFrame['t'], EngineFrameKind> = true;
const stubKindsMatch: Same<StubFrame['t'], StubFrameKind> = true;
void engineKindsMatch;
void stubKindsMatch;

/** The frame of kind `K`. */
export type StubFrameOf<K extends StubFrameKind> = Extract<StubFrame, { t: K }>;
