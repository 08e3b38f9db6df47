// The engine's transport choices, one typed object (issue 38 "one switch"):
// built once by the engine's option parsing (server/cli-options.ts) from the
// command line, then the environment, then these defaults, and passed down
// to the frontends. No frontend reads a transport environment variable
// itself: a test or a bench that wants another transport passes it here.
// Each option is documented once, in docs/reference.md ("Transport options").

/**
 * Which HTTP/2 server answers the gRPC listeners (`--grpc-front`):
 * - `default`: the TCP port on node:http2 (grpc-js, with the direct
 *   ModelInfer route), the `--grpc-unix-socket` on the own front. The TCP
 *   port faces any client that reaches it; node:http2 stays its server until
 *   the own front passes the attack suite and the differential tests
 *   (issue 37, docs/engine/h2-front.md#conformance-and-defences).
 * - `own`: both listeners on the own front (net/h2/).
 * - `grpc-js`: both on node:http2.
 */
export type GrpcFrontMode = 'default' | 'own' | 'grpc-js';

export interface EngineTransport {
  /** `--grpc-front` (ENGINE_GRPC_FRONT). */
  grpcFront: GrpcFrontMode;
  /** `--grpc-direct-infer` (ENGINE_GRPC_DIRECT_INFER=0 off): plain unary ModelInfer answered ahead of grpc-js. */
  grpcDirectInfer: boolean;
  /** `--grpc-pooled-decoder` (ENGINE_GRPC_POOLED_DECODER=0 off): grpc-js's message decoder replaced by the receive-pool reader. */
  grpcPooledDecoder: boolean;
  /** `--http1-front` (ENGINE_HTTP1_FRONT=0 off): plain, complete infer requests on net/http1's front ahead of node:http. */
  http1Front: boolean;
}

export const DEFAULT_ENGINE_TRANSPORT: Readonly<EngineTransport> = Object.freeze({
  grpcFront: 'default',
  grpcDirectInfer: true,
  grpcPooledDecoder: true,
  http1Front: true,
});

/** The environment variable read for each option when its flag is absent. */
export const ENGINE_TRANSPORT_ENV = {
  grpcFront: 'ENGINE_GRPC_FRONT',
  grpcDirectInfer: 'ENGINE_GRPC_DIRECT_INFER',
  grpcPooledDecoder: 'ENGINE_GRPC_POOLED_DECODER',
  http1Front: 'ENGINE_HTTP1_FRONT',
} as const satisfies Record<keyof EngineTransport, string>;

/** The command-line flag of each option. */
export const ENGINE_TRANSPORT_FLAGS = {
  grpcFront: 'grpc-front',
  grpcDirectInfer: 'grpc-direct-infer',
  grpcPooledDecoder: 'grpc-pooled-decoder',
  http1Front: 'http1-front',
} as const satisfies Record<keyof EngineTransport, string>;

export function grpcFrontMode(v: string | undefined, where = '--grpc-front'): GrpcFrontMode {
  if (v === undefined || v === '' || v === 'default') return 'default';
  if (v === 'own' || v === 'grpc-js') return v;
  throw new Error(`${where}: expected own, grpc-js or default, got '${v}'`);
}

function onOff(v: string | undefined, where: string, dflt: boolean): boolean {
  if (v === undefined || v === '') return dflt;
  if (/^(true|1|yes|on)$/i.test(v)) return true;
  if (/^(false|0|no|off)$/i.test(v)) return false;
  throw new Error(`${where}: expected true or false, got '${v}'`);
}

/**
 * The transport object from parsed flag values (`--grpc-front` etc., by flag
 * name) and the environment: a flag wins over its variable, a variable over
 * the default. A value that is neither is refused naming where it came from.
 */
export function engineTransportFrom(flags: Record<string, string | undefined>, env: NodeJS.ProcessEnv): EngineTransport {
  const pick = (k: keyof EngineTransport): [string | undefined, string] => {
    const flag = flags[ENGINE_TRANSPORT_FLAGS[k]];
    return flag !== undefined ? [flag, `--${ENGINE_TRANSPORT_FLAGS[k]}`] : [env[ENGINE_TRANSPORT_ENV[k]], ENGINE_TRANSPORT_ENV[k]];
  };
  const flag = (k: 'grpcDirectInfer' | 'grpcPooledDecoder' | 'http1Front') => onOff(...pick(k), DEFAULT_ENGINE_TRANSPORT[k]);
  return {
    grpcFront: grpcFrontMode(...pick('grpcFront')),
    grpcDirectInfer: flag('grpcDirectInfer'),
    grpcPooledDecoder: flag('grpcPooledDecoder'),
    http1Front: flag('http1Front'),
  };
}
