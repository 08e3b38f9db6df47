// Reusable buffers for large received request bodies (gRPC messages, HTTP
// bodies), so that receiving a tensor inline does not allocate a fresh
// ArrayBuffer per request.
//
// Why: V8 counts every ArrayBuffer's bytes as external memory and starts a
// full mark-compact about every 64 MiB of it. A fresh 588 KiB buffer per
// encoder request (on top of the socket's own read buffers, which Node
// allocates and we cannot avoid) meant a mark-compact every ~50 requests;
// measured, GC was the largest single cost of the inline path (main thread
// and V8's helper threads, ~1 ms CPU per request). Reusing the body buffer
// halves the external bytes allocated per request.
//
// Ownership: take() hands out a Buffer; whoever took it calls release() once
// nothing can read it any more (for a request: after its reply has been
// serialized, and only once its inference has settled). A buffer never
// released is simply garbage collected, as any Buffer would be, so callers
// that cannot tell when their bytes die (streams, clients) just do not
// release. Buffers from here are never pooled slices of Node's 8 KiB pool:
// each owns its ArrayBuffer, so tensors viewing it may be transferred.

/** Bodies below this are left to ordinary allocation (small ones cost little external memory). */
export const POOLED_MIN_BYTES = 64 * 1024;
/** Bodies above this are never kept (a 100 MiB body should not stay resident after its request). */
export const POOLED_MAX_BYTES = 16 * 2 ** 20;
/** At most this many free buffers, and this many bytes in them. */
const MAX_FREE = 32;
const MAX_FREE_BYTES = 64 * 2 ** 20;

const free: ArrayBuffer[] = [];
let freeBytes = 0;
/** ArrayBuffers handed out by take(), so release() ignores foreign or double releases. */
const out = new WeakSet<ArrayBuffer>();

/** A Buffer of exactly `bytes` bytes, from the free list when one is big enough. */
export function take(bytes: number): Buffer {
  if (bytes < POOLED_MIN_BYTES || bytes > POOLED_MAX_BYTES) return Buffer.allocUnsafeSlow(bytes);
  // Smallest free buffer that fits: keeps big buffers for big bodies.
  let best = -1;
  for (let i = 0; i < free.length; i++) {
    const b = free[i]!;
    if (b.byteLength >= bytes && (best < 0 || b.byteLength < free[best]!.byteLength)) best = i;
  }
  let ab: ArrayBuffer;
  if (best >= 0) {
    ab = free[best]!;
    free[best] = free[free.length - 1]!;
    free.pop();
    freeBytes -= ab.byteLength;
  } else {
    // Round up so that bodies of slightly different sizes share buffers.
    ab = new ArrayBuffer(Math.ceil(bytes / 65536) * 65536);
  }
  out.add(ab);
  return Buffer.from(ab, 0, bytes);
}

/** Give back a buffer from take() (any view of it will do); others are ignored. */
export function release(view: ArrayBufferView | undefined): void {
  const ab = view?.buffer as ArrayBuffer | undefined;
  if (!ab || !out.has(ab)) return;
  out.delete(ab);
  if (ab.byteLength === 0 /* detached (transferred) */ || free.length >= MAX_FREE || freeBytes + ab.byteLength > MAX_FREE_BYTES) return;
  free.push(ab);
  freeBytes += ab.byteLength;
}

/** Free buffers held now (for tests). */
export function freeCount(): number {
  return free.length;
}
