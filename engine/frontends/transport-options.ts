// The engine's transport choices, one typed object (issue 38 "one switch"):
// built once by the engine's option parsing (server/cli-options.ts) from the
// command line, then the environment, then these defaults, and passed down
// to the frontends. No frontend reads a transport environment variable
// itself. Documented once, in docs/reference.md ("Transport options"); the
// doors they compose in docs/architecture.md ("Doors into the engine").

/**
 * Which HTTP/2 server answers the gRPC listeners (`--grpc-front`); either
 * way a plain unary ModelInfer is read by the same DirectInferCall:
 * - `default`, `own`: the TCP port and the `--grpc-unix-socket` on the own
 *   front (net/h2/), every bound a named setting (--grpc-h2-limit), held to
 *   node:http2 by the differential tests and the attack suite (issue 37,
 *   docs/engine/h2-front.md#conformance-and-defences). Until issue 37 the
 *   TCP port's default was node:http2; it changed because node:http2 on
 *   Node 20 aborts the whole process on a client's GOAWAY + HEADERS + a
 *   frame of a wrong length, and does not cut a stream flood.
 * - `grpc-js`: both on node:http2 (grpc-js, with the direct ModelInfer route).
 */
export type GrpcFrontMode = 'default' | 'own' | 'grpc-js';

export interface EngineTransport {
  /** `--grpc-front` (ENGINE_GRPC_FRONT). */
  grpcFront: GrpcFrontMode;
  /**
   * Plain unary ModelInfer answered ahead of grpc-js (default true). Not a
   * flag: false only in the differential tests, whose reference is grpc-js
   * answering every call (L0_grpc_direct_infer).
   */
  grpcDirectInfer: boolean;
  /**
   * Plain, complete infer requests on net/http1's front ahead of node:http
   * (default true). Not a flag: false only where a test compares the front
   * with node:http reading every request.
   */
  http1Front: boolean;
}

export const DEFAULT_ENGINE_TRANSPORT: Readonly<EngineTransport> = Object.freeze({
  grpcFront: 'default',
  grpcDirectInfer: true,
  http1Front: true,
});

/** The environment variable read for an option when its flag is absent. */
export const ENGINE_TRANSPORT_ENV = { grpcFront: 'ENGINE_GRPC_FRONT' } as const;

/**
 * Switches removed with the doors they opened (issue 38): set, they stop the
 * start rather than be ignored, so a script that relied on one learns so.
 */
export const REMOVED_TRANSPORT_ENV = ['ENGINE_GRPC_DIRECT_INFER', 'ENGINE_GRPC_POOLED_DECODER', 'ENGINE_HTTP1_FRONT'] as const;

export function grpcFrontMode(v: string | undefined, where = '--grpc-front'): GrpcFrontMode {
  if (v === undefined || v === '' || v === 'default') return 'default';
  if (v === 'own' || v === 'grpc-js') return v;
  throw new Error(`${where}: expected own, grpc-js or default, got '${v}'`);
}

/** The transport object from the `--grpc-front` flag's value and the environment: the flag wins over its variable. */
export function engineTransportFrom(flags: { 'grpc-front'?: string }, env: NodeJS.ProcessEnv): EngineTransport {
  const removed = REMOVED_TRANSPORT_ENV.filter((v) => env[v] !== undefined);
  if (removed.length)
    throw new Error(`${removed.join(', ')}: removed in issue 38 with the doors it opened (docs/architecture.md#doors-into-the-engine)`);
  const flag = flags['grpc-front'];
  return {
    ...DEFAULT_ENGINE_TRANSPORT,
    grpcFront:
      flag !== undefined ? grpcFrontMode(flag) : grpcFrontMode(env[ENGINE_TRANSPORT_ENV.grpcFront], ENGINE_TRANSPORT_ENV.grpcFront),
  };
}
