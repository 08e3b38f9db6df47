// Command lines of `npm start`'s two children. The engine runs beside its
// gateway, so by default it listens on loopback only and accepts client shm
// regions only under the gateway's key prefix: nobody else who can reach the
// host can make it read or overwrite arbitrary /dev/shm objects through a
// model. START_ENGINE_ARGS / START_GATEWAY_ARGS are appended after these
// defaults and win over them (docs/reliability.md, "Opening npm start up").
//
// The engine's model-repository, trace, logging and shared-memory APIs answer
// only calls carrying a key generated per start (Triton's restricted-API
// groups): the gateway gets it, nobody else who reaches the loopback ports
// can load models, register shm or change settings. The key travels in the
// children's environment, not on their command lines (which other local
// users can read); START_ADMIN_KEY picks it (to call those APIs yourself).

import { randomBytes } from 'node:crypto';
import { ENGINE_NODE_FLAGS } from '../engine/node-flags.ts';

/** The groups `npm start` keeps for the gateway, and the header name of their key. */
export const START_RESTRICTED_GROUPS = 'model-repository,trace,logging,shared-memory';
export const START_KEY_HEADER = 'admin-key';

const split = (s: string | undefined) => (s ?? '').split(/\s+/).filter(Boolean);

/** The value of `--name=value` in args (the last one wins, as the parsers do). */
function flag(args: string[], name: string): string | undefined {
  let v: string | undefined;
  for (const a of args) if (a.startsWith(`--${name}=`)) v = a.slice(name.length + 3);
  return v;
}

/**
 * The engine's and the gateway's argv (after `node --import tsx`; the
 * engine's begins with its Node flags, engine/node-flags.ts). With
 * `grpcSocket`, the colocated gateway reaches the engine over that Unix
 * socket (no loopback TCP per call; the engine keeps its TCP ports for
 * everyone else). With `localSocket`, the engine also serves the local
 * channel there (unary ModelInfer without HTTP/2, docs/engine/local-channel.md)
 * and the gateway sends its calls over it, gRPC being the fallback.
 */
export function startArgs(
  env: NodeJS.ProcessEnv,
  grpcSocket?: string,
  key = env.START_ADMIN_KEY || randomBytes(32).toString('hex'),
  localSocket?: string,
): { engine: string[]; gateway: string[]; engineEnv: NodeJS.ProcessEnv; gatewayEnv: NodeJS.ProcessEnv } {
  const engineExtra = split(env.START_ENGINE_ARGS);
  const gatewayExtra = split(env.START_GATEWAY_ARGS);
  const grpcPort = flag(engineExtra, 'grpc-port') ?? '8001';
  const httpPort = flag(engineExtra, 'http-port') ?? '8000';
  const prefix = flag(gatewayExtra, 'prefix') ?? 'tgw';
  return {
    engine: [
      ...ENGINE_NODE_FLAGS,
      'engine/main.ts',
      '--model-repository=model_repository',
      '--http-address=127.0.0.1',
      '--allow-client-shm=true',
      `--shm-key-prefix=/${prefix}_`,
      ...(grpcSocket ? [`--grpc-unix-socket=${grpcSocket}`] : []),
      ...(localSocket ? [`--local-socket=${localSocket}`] : []),
      ...engineExtra,
    ],
    gateway: [
      'gateway/main.ts',
      grpcSocket ? `--engine=unix:${grpcSocket}` : `--engine=127.0.0.1:${grpcPort}`,
      `--engine-http=127.0.0.1:${httpPort}`,
      '--functions=functions',
      ...(localSocket ? [`--engine-local-socket=${localSocket}`] : []),
      ...gatewayExtra,
    ],
    engineEnv: {
      ENGINE_HTTP_RESTRICTED_API: `${START_RESTRICTED_GROUPS}:${START_KEY_HEADER}=${key}`,
      ENGINE_GRPC_RESTRICTED_PROTOCOL: `${START_RESTRICTED_GROUPS}:${START_KEY_HEADER}=${key}`,
    },
    gatewayEnv: { GATEWAY_ENGINE_KEY: `${START_KEY_HEADER}=${key}` },
  };
}

/**
 * Node's argv for a child: compiled, its entry mapped to dist/ (engine/main.ts
 * -> dist/engine/main.js); otherwise run through tsx as an import hook.
 */
export function childArgv(args: string[], compiled: boolean): string[] {
  if (!compiled) return ['--import', 'tsx', ...args];
  return args.map((a) => (/^(engine|gateway)\/\S+\.ts$/.test(a) ? `dist/${a.slice(0, -3)}.js` : a));
}
