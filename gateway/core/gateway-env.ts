// The gateway's Hono environment: what one request's handlers hand each
// other through the context (c.set / c.get), typed once so no cast is needed.
// invoke and the async routes record the function and how its payload moved;
// app.ts's middleware reads them for metrics and the X-Payload-Transfer header.

/** How a call's tensors reached the engine: inline in the gRPC message, or staged in shared memory. */
export type PayloadTransfer = 'inline' | 'shm';

export interface GatewayVariables {
  /** The function being called, once resolved (absent when resolving failed). */
  fn?: string;
  /** How the call's payload moved (absent: inline). */
  transfer?: PayloadTransfer;
}

export interface GatewayEnv {
  Variables: GatewayVariables;
}
