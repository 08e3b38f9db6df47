// The engine's protocol-neutral request and response (Triton's
// InferenceRequest / InferenceResponse). Frontends (gRPC, HTTP) translate
// wire messages to these; schedulers and backends see only these.
import type { Datatype } from './datatypes.ts';
import type { StatusError } from './status.ts';
import type { RequestTrace } from './request-trace.ts';
import type { CancelSignal } from './cancel-signal.ts';
import type { ShmRef, Tensor } from './tensor.ts';

// Importers keep reading the tensor types from infer-request.ts.
export type { ShmRef, Tensor } from './tensor.ts';

/** Where the engine found an input's shm bytes: enough for a worker thread to map them itself. */
export interface ShmLocation {
  key: string;
  /** Offset in the shm object (region offset + tensor offset). */
  offset: number;
  byteSize: number;
  /** The registered region's own offset and size in the object (what a worker maps once). */
  regionOffset: number;
  regionSize: number;
  /** The engine's open fd of the object, valid while the request holds the region (fds are process-wide). */
  fd: number;
}

/**
 * A request input. A frontend sets `shm` (and leaves `data` empty) when the
 * client sent the bytes in a registered region; the engine then resolves it,
 * filling `data` with a view over the mapping and `shmLocation`.
 */
export interface InferInput extends Tensor {
  shm?: ShmRef;
  shmLocation?: ShmLocation;
  /** Set with shmLocation: re-checks that the region still holds the bytes (see ShmAcquired.check). */
  shmCheck?: () => Error | undefined;
}

export interface RequestedOutput {
  name: string;
  /** Write this output into a registered region instead of returning its bytes. */
  shm?: ShmRef;
  /** classification extension (unsupported values rejected at the frontend). */
  classification?: number;
  /** HTTP only: return as binary. */
  binary?: boolean;
}

export type ParamValue = boolean | number | string | bigint;

/** One inference request as the engine sees it. */
export interface InferRequest {
  modelName: string;
  /** '' or undefined = policy default (latest ready). */
  modelVersion?: string;
  id?: string;
  inputs: InferInput[];
  /** Empty = all outputs. */
  outputs: RequestedOutput[];
  parameters: Record<string, ParamValue>;
  /**
   * HTTP's raw binary request (Inference-Header-Content-Length: 0): the one
   * input's name, datatype and shape are deduced from the model's config
   * before validation (engine/server/raw-input.ts).
   */
  rawInput?: boolean;
  /** Priority level (1 = highest); 0 = model default. */
  priority?: number;
  /** Queue timeout override in microseconds; 0 = model default. */
  timeoutUs?: number;
  /** Set by the frontend: when the request arrived (process.hrtime.bigint()). */
  arrivalNs?: bigint;
  /** Aborted when the client goes away (an AbortSignal, or the gRPC frontend's cheaper RequestCancel). */
  signal?: CancelSignal;
  /** The client's own signal (`signal` may become a deadline's): its abort is a cancellation in the statistics. */
  clientSignal?: CancelSignal;
  /**
   * Set by a streaming frontend (ModelStreamInfer): a decoupled model's
   * responses (or per-response errors) are delivered here as they come, and
   * the request's promise then resolves with a `streamEnd` response.
   */
  onResponse?: (response: InferResponse | StatusError) => void;
  /**
   * Set by a unary frontend (ModelInfer, HTTP /infer): the UNSUPPORTED
   * message to answer when the model turns out to be decoupled (its responses
   * need a stream). Checked where the model is looked up for the request.
   */
  unaryOnly?: string;
  /**
   * Told each execution's compute times once this request has run (an
   * ensemble sums its steps' into its own statistics, as Triton does).
   */
  onExecuted?: (timing: { computeInputNs: number; computeInferNs: number; computeOutputNs: number }) => void;
  /** An incoming W3C traceparent (gRPC metadata / HTTP header). */
  traceparent?: string;
  /** Set by the server when the request is traced; an ensemble's steps get it as parentTrace. */
  trace?: RequestTrace;
  parentTrace?: RequestTrace;
}

export interface InferResponse {
  modelName: string;
  modelVersion: string;
  id?: string;
  /**
   * Outputs in requested order. An output written to shm has `shm` set and an
   * empty `data`.
   */
  outputs: Array<Tensor & { shm?: ShmRef }>;
  parameters?: Record<string, ParamValue>;
  /** A decoupled model's end of stream: every response went through `onResponse`; nothing to send. */
  streamEnd?: boolean;
  /** A decoupled model's response sent with the final flag (the stream's last; a streamEnd still follows). */
  final?: boolean;
}
