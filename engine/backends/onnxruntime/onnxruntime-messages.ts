// Messages between an onnxruntime instance (main thread) and its worker.
// Tensor bytes travel as transferred ArrayBuffers (no copy) or as shm
// locations the worker maps itself.

/** A tensor crossing the thread boundary, its bytes in a transferred buffer. */
export interface WireTensor {
  name: string;
  /** ORT element type: float32, int64, string, ... */
  type: string;
  dims: number[];
  /** Bytes at [byteOffset, byteOffset+byteLength) of `buffer` (transferred). */
  buffer?: ArrayBuffer;
  byteOffset?: number;
  byteLength?: number;
}

export interface WireTensorIn extends WireTensor {
  /** Or: bytes in a shm object the worker maps itself (whole region once, cached). */
  shm?: WireShm;
}

/** A registered region (key, offset and size of its mapping) and a slice of it. */
export interface WireShm {
  key: string;
  /** The engine's open fd of the object (valid during this run): map and fstat through it, not by key. */
  fd: number;
  regionOffset: number;
  regionSize: number;
  /** Offset of the tensor inside the region. */
  offset: number;
  byteSize: number;
}

export interface WireOutputRequest {
  name: string;
  /** Write into this shm location (pre-allocated ORT output) when the shape is known. */
  shm?: WireShm & { dims: number[]; type: string };
}

export interface WireTensorOut extends WireTensor {
  /** Or: written into the requested shm location. */
  inShm?: boolean;
}

export type ToWorker =
  | { kind: 'run'; seq: number; inputs: WireTensorIn[]; outputs: WireOutputRequest[] }
  | { kind: 'forget-shm'; key: string }
  | { kind: 'close' };

export type FromWorker =
  | { kind: 'ready'; inputs: WireMeta[]; outputs: WireMeta[] }
  | { kind: 'load-error'; message: string }
  | {
      kind: 'result';
      seq: number;
      outputs: WireTensorOut[];
      /** Input buffers handed back for reuse. */
      returned: ArrayBuffer[];
      inferNs: number;
    }
  | { kind: 'run-error'; seq: number; message: string; returned: ArrayBuffer[] }
  | { kind: 'closed' };

export interface WireMeta {
  name: string;
  type: string;
  shape: Array<number | string>;
}

export interface WorkerInit {
  modelPath: string;
  instanceName: string;
  sessionOptions: Record<string, unknown>;
  /** ORT RunOptions for every run (memory.enable_memory_arena_shrinkage), if any. */
  runOptions?: Record<string, unknown>;
}
