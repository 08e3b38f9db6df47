// A tensor as the engine carries it, and where its bytes sit when they live in
// a client's shared-memory region. Apart from infer-request.ts so traces
// (request-trace.ts) can hold tensors without importing the request back.
import type { Datatype } from './datatypes.ts';

/** Where a tensor's bytes live in a registered system shared-memory region. */
export interface ShmRef {
  /** Registered region name (as given to SystemSharedMemoryRegister). */
  region: string;
  /** Offset inside the registered region (not the shm object). */
  offset: number;
  byteSize: number;
  /**
   * Both values exactly, when either is past 2^53 (an HTTP body may send any
   * uint64): the request then fails at the region's checks, with Triton's text.
   */
  wide?: { offset: bigint; byteSize: bigint };
}

/**
 * A tensor. `data` holds its bytes (little-endian, BYTES serialized with
 * 4-byte lengths). The bytes may be a view over a shm mapping: consumers must
 * not keep them past the request's completion.
 */
export interface Tensor {
  name: string;
  datatype: Datatype;
  shape: number[];
  data: Uint8Array;
}
