// The hooks between one call and progressive delivery and usage plans (both
// implemented outside calls/: delivery/rollout-manager.ts, plans/plan-gate.ts): invoke.ts's
// runFunction hands the call to a CallRouter (the rollout manager), which
// picks the side (stable or canary), runs the call there, records its
// outcome for the gates, and may mirror it to a shadow after the answer.
import type { ResolvedFunction, TensorSpec } from './function-registry.ts';
import type { InputTensor, OutputTensor } from './payload-codec.ts';

/** What the call path knows of a call beyond its function and id. */
export interface CallMeta {
  /** The X-Deploy-Side header (a pinned side), if sent. */
  pin?: string;
  /** False when the gateway made the request id up (the split then counts instead of hashing). Default true. */
  clientId?: boolean;
}

/** One run of a call on the engine, for a given function (stable or canary). */
export type EngineRun = (fn: ResolvedFunction) => Promise<{ outputs: OutputTensor[]; transfer: 'inline' | 'shm' }>;

export interface CallRouter {
  /** Run the call on the side it falls on; resolves as `run` does, plus the side when a rollout covered it. */
  run(
    fn: ResolvedFunction,
    id: string,
    meta: CallMeta | undefined,
    inputs: InputTensor[],
    specs: TensorSpec[],
    run: EngineRun,
  ): Promise<{ outputs: OutputTensor[]; transfer: 'inline' | 'shm'; side?: string }>;
}

/** What the call path asks of usage plans. */
export interface PlanGate {
  /** Admit the call or throw the 429 (or PLANS_UNAVAILABLE); `requestId`: the client's own id, for retries. */
  admit(header: (name: string) => string | undefined, requestId: string | undefined): Promise<void>;
}
