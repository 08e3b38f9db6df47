// The gateway's transport choices, one typed object (issue 38 "one switch"):
// built once by the gateway's option parsing (main.ts parseArgs) from the
// command line, then the environment, then these defaults, and passed down
// to the fronts (server.ts) and the engine client (upstream/engine-client.ts).
// No module reads a transport environment variable itself. Each option is
// documented once, in docs/reference.md ("Transport options").

export interface GatewayTransport {
  /** `--direct-route`: plain JSON `/fn` calls answered from node:http ahead of Hono (http/direct-call.ts). */
  directRoute: boolean;
  /** `--http1-front`: plain, complete direct calls on net/http1's front ahead of node:http (needs directRoute). */
  http1Front: boolean;
  /** `--engine-local-socket` (GATEWAY_ENGINE_LOCAL_SOCKET): the engine's local channel; unset: gRPC only. */
  engineLocalSocket?: string;
  /** `--engine-http` (GATEWAY_ENGINE_HTTP): the engine's HTTP address, where the console reads loads; unset: none. */
  engineHttp?: string;
  /** `--engine-grpc-direct` (GATEWAY_GRPC_DIRECT_INFER=0 off): ModelInfer over gRPC on node:http2 (net/h2/grpc-direct-unary.ts) rather than grpc-js. */
  engineGrpcDirect: boolean;
}

export const DEFAULT_GATEWAY_TRANSPORT: Readonly<GatewayTransport> = Object.freeze({
  directRoute: true,
  http1Front: true,
  engineGrpcDirect: true,
});

/** The environment variable read for an option when its flag is absent. */
export const GATEWAY_TRANSPORT_ENV = {
  engineLocalSocket: 'GATEWAY_ENGINE_LOCAL_SOCKET',
  engineHttp: 'GATEWAY_ENGINE_HTTP',
  engineGrpcDirect: 'GATEWAY_GRPC_DIRECT_INFER',
} as const satisfies Partial<Record<keyof GatewayTransport, string>>;

/** The command-line flag of each option. */
export const GATEWAY_TRANSPORT_FLAGS = {
  directRoute: 'direct-route',
  http1Front: 'http1-front',
  engineLocalSocket: 'engine-local-socket',
  engineHttp: 'engine-http',
  engineGrpcDirect: 'engine-grpc-direct',
} as const satisfies Record<keyof GatewayTransport, string>;

const onOff = (v: string | undefined, where: string, dflt: boolean): boolean => {
  if (v === undefined || v === '') return dflt;
  if (/^(true|1|yes|on)$/i.test(v)) return true;
  if (/^(false|0|no|off)$/i.test(v)) return false;
  throw new Error(`${where}: expected true or false, got '${v}'`);
};

/** The transport object from flag values (by flag name) and the environment: a flag wins over its variable. */
export function gatewayTransportFrom(flags: Record<string, string | undefined>, env: NodeJS.ProcessEnv): GatewayTransport {
  const fromEnv = (k: keyof typeof GATEWAY_TRANSPORT_ENV): [string | undefined, string] => {
    const f = flags[GATEWAY_TRANSPORT_FLAGS[k]];
    return f !== undefined ? [f, `--${GATEWAY_TRANSPORT_FLAGS[k]}`] : [env[GATEWAY_TRANSPORT_ENV[k]], GATEWAY_TRANSPORT_ENV[k]];
  };
  const d = DEFAULT_GATEWAY_TRANSPORT;
  return {
    directRoute: onOff(flags['direct-route'], '--direct-route', d.directRoute),
    http1Front: onOff(flags['http1-front'], '--http1-front', d.http1Front),
    engineLocalSocket: fromEnv('engineLocalSocket')[0] || undefined,
    engineHttp: fromEnv('engineHttp')[0] || undefined,
    engineGrpcDirect: onOff(...fromEnv('engineGrpcDirect'), d.engineGrpcDirect),
  };
}
