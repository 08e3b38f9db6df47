// Triton's restricted API groups (server src/restricted_features.h): an
// operator can require a header for a group of endpoints, e.g.
//   --http-restricted-api=model-repository,trace:admin-key=s3cret
//   --grpc-restricted-protocol=model-repository,trace:admin-key=s3cret
// Over HTTP the request must carry `admin-key: s3cret`, else 403 and
// {"error":"This API is restricted, expecting header 'admin-key'"}; over gRPC
// the metadata `triton-grpc-protocol-admin-key`, else UNAVAILABLE "This
// protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'".
// Which endpoint or RPC belongs to which group follows Triton's
// http_server.cc and grpc_server.cc. Both frontends use this one module;
// the decision is a pure function of the group and the caller's headers.
import { createHash, timingSafeEqual } from 'node:crypto';

/** Triton's group names, in its order. */
export const RESTRICTED_GROUPS = [
  'health',
  'metadata',
  'inference',
  'shared-memory',
  'model-config',
  'model-repository',
  'statistics',
  'trace',
  'logging',
] as const;
export type RestrictedGroup = (typeof RESTRICTED_GROUPS)[number];

/** The header a restricted group needs, and its value. */
export interface Restriction {
  /** As configured (the error text quotes it); matched case-insensitively. */
  header: string;
  value: string;
}
export type RestrictedFeatures = ReadonlyMap<RestrictedGroup, Restriction>;

/** gRPC metadata names are this prefix plus the configured key (Triton's). */
export const GRPC_HEADER_PREFIX = 'triton-grpc-protocol-';

const isGroup = (s: string): s is RestrictedGroup => (RESTRICTED_GROUPS as readonly string[]).includes(s);

/**
 * Add one `--http-restricted-api` / `--grpc-restricted-protocol` value
 * (`<group>[,<group>...]:<key>=<value>`) to `into`. Errors read as Triton's
 * command-line parser words them: the option format, an unknown group, a
 * group named in two values.
 */
export function parseRestrictedFeature(
  arg: string,
  option: 'http-restricted-api' | 'grpc-restricted-protocol',
  into: Map<RestrictedGroup, Restriction>,
): void {
  const what = option === 'http-restricted-api' ? 'api' : 'protocol';
  const prefix = option === 'grpc-restricted-protocol' ? GRPC_HEADER_PREFIX : '';
  const colon = arg.indexOf(':');
  const eq = colon < 0 ? -1 : arg.indexOf('=', colon + 1);
  const groups = colon < 0 ? '' : arg.slice(0, colon);
  const key = eq < 0 ? '' : arg.slice(colon + 1, eq);
  const value = eq < 0 ? '' : arg.slice(eq + 1);
  if (!groups || !key || !value) throw new Error(`--${option} option format is '<config name>:<setting>=<value>'. Got ${arg}`);
  // A header name is an HTTP token; anything else could never be sent.
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key)) throw new Error(`--${option}: '${key}' is not a valid header name`);
  for (const g of groups.split(',')) {
    if (!isGroup(g)) throw new Error(`unknown restricted ${what} '${g}'`);
    if (into.has(g)) throw new Error(`restricted ${what} '${g}' can not be specified in multiple config groups`);
    into.set(g, { header: prefix + key, value });
  }
}

/** Parse every value of one option; later options may not repeat a group. */
export function parseRestrictedFeatures(
  args: string[],
  option: 'http-restricted-api' | 'grpc-restricted-protocol',
): Map<RestrictedGroup, Restriction> {
  const out = new Map<RestrictedGroup, Restriction>();
  for (const a of args) parseRestrictedFeature(a, option, out);
  return out;
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** True when `got` is the restriction's value; compares digests in constant time so timing says nothing of the value. */
export function restrictionMet(r: Restriction, got: string | undefined): boolean {
  return got !== undefined && timingSafeEqual(digest(got), digest(r.value));
}

/** The text Triton answers a restricted HTTP request with (403). */
export const httpRestrictedText = (r: Restriction) => `This API is restricted, expecting header '${r.header}'`;
/** The text Triton answers a restricted gRPC call with (UNAVAILABLE). */
export const grpcRestrictedText = (r: Restriction) => `This protocol is restricted, expecting header '${r.header}'`;

/**
 * The group of an HTTP path as the Hono router sees it (decoded, no query),
 * after Triton's HTTPAPIServer::Handle. Unknown paths have none (they 404).
 * It errs towards a group: a path that could reach a group's handler is in it.
 */
export function httpApiGroup(path: string): RestrictedGroup | undefined {
  const s = path.split('/').filter((x, i) => i === 0 || x !== '');
  if (s[0] !== '' || s[1] !== 'v2') return undefined;
  const rest = s.slice(2);
  if (rest.length === 0) return 'metadata';
  switch (rest[0]) {
    case 'health':
      return 'health';
    case 'logging':
      return 'logging';
    case 'trace':
      return 'trace';
    case 'repository':
      return 'model-repository';
    case 'systemsharedmemory':
    case 'cudasharedmemory':
      return 'shared-memory';
    case 'models':
      return modelPathGroup(rest.slice(1));
    default:
      return undefined;
  }
}

/** /v2/models/{m}[/versions/{v}][/<kind>] -> the kind's group. */
function modelPathGroup(p: string[]): RestrictedGroup | undefined {
  if (p.length === 0) return undefined;
  if (p.length === 1 && p[0] === 'stats') return 'statistics';
  let kind = p.slice(1);
  if (kind[0] === 'versions' && kind.length >= 2) kind = kind.slice(2);
  switch (kind.join('/')) {
    case '':
      return 'metadata';
    case 'ready':
      return 'health';
    case 'infer':
    case 'generate':
    case 'generate_stream':
      return 'inference';
    case 'config':
      return 'model-config';
    case 'stats':
      return 'statistics';
    case 'trace/setting':
      return 'trace';
    default:
      return undefined;
  }
}

/** The group of each GRPCInferenceService RPC and the standard health Check (Triton's grpc_server.cc). */
export const GRPC_RPC_GROUPS: Readonly<Record<string, RestrictedGroup>> = {
  ServerLive: 'health',
  ServerReady: 'health',
  ModelReady: 'health',
  Check: 'health',
  ServerMetadata: 'metadata',
  ModelMetadata: 'metadata',
  ModelInfer: 'inference',
  ModelStreamInfer: 'inference',
  ModelConfig: 'model-config',
  ModelStatistics: 'statistics',
  RepositoryIndex: 'model-repository',
  RepositoryModelLoad: 'model-repository',
  RepositoryModelUnload: 'model-repository',
  SystemSharedMemoryStatus: 'shared-memory',
  SystemSharedMemoryRegister: 'shared-memory',
  SystemSharedMemoryUnregister: 'shared-memory',
  CudaSharedMemoryStatus: 'shared-memory',
  CudaSharedMemoryRegister: 'shared-memory',
  CudaSharedMemoryUnregister: 'shared-memory',
  TraceSetting: 'trace',
  LogSettings: 'logging',
};

/**
 * The restriction a call to `group` fails, given a header reader; undefined
 * when the group is open or the caller sent the right value.
 */
export function failedRestriction(
  features: RestrictedFeatures | undefined,
  group: RestrictedGroup | undefined,
  headerOf: (lowercaseName: string) => string | undefined,
): Restriction | undefined {
  if (!features || !group) return undefined;
  const r = features.get(group);
  if (!r) return undefined;
  return restrictionMet(r, headerOf(r.header.toLowerCase())) ? undefined : r;
}

/** The environment variable that may carry one more value of each option (kept off the command line, which other local users can read). */
export const RESTRICTED_ENV = {
  'http-restricted-api': 'ENGINE_HTTP_RESTRICTED_API',
  'grpc-restricted-protocol': 'ENGINE_GRPC_RESTRICTED_PROTOCOL',
} as const;

/**
 * The groups of one option: its command-line values, and the value in its
 * environment variable (RESTRICTED_ENV) for groups no flag names (a flag wins).
 */
export function restrictedOption(
  flags: string[],
  env: NodeJS.ProcessEnv,
  option: 'http-restricted-api' | 'grpc-restricted-protocol',
): Map<RestrictedGroup, Restriction> {
  const out = parseRestrictedFeatures(flags, option);
  const name = RESTRICTED_ENV[option];
  const value = env[name];
  if (!value) return out;
  let fromEnv: Map<RestrictedGroup, Restriction>;
  try {
    fromEnv = parseRestrictedFeatures([value], option);
  } catch (err) {
    // The value may hold the secret: name the variable, never echo it.
    throw new Error(`${name}: expected <group>[,<group>...]:<key>=<value> with known groups (${(err as Error).message.split(' Got ')[0]})`);
  }
  for (const [g, r] of fromEnv) if (!out.has(g)) out.set(g, r);
  return out;
}
