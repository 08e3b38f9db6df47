// Who may import what: the project's layering rules, checked by
// dependency-cruiser (`npm run lint:deps`, run by `npm test`). Each rule is
// named; a wrong import fails with the rule's name and the offending edge.
// Type-only imports count: a type reached across a wall is still coupling.

// The gateway's wings in their import order (MOVES.md, gateway/README.md): a
// wing imports only the wings after it; nothing imports the root (main.ts,
// server.ts, app.ts), which composes them.
const GATEWAY_WINGS = ['console', 'http', 'jobs', 'webhooks', 'delivery', 'plans', 'deploy', 'calls', 'staging', 'upstream', 'core'];
const gatewayWingRules = GATEWAY_WINGS.map((wing, i) => ({
  name: 'gateway-wing-order',
  severity: 'error',
  comment: `gateway/${wing}/ imports only the wings after it (${GATEWAY_WINGS.slice(i + 1).join(', ') || 'none'}), never an earlier wing or the root`,
  from: { path: `^gateway/${wing}/` },
  to: {
    path: [
      `^gateway/[^/]+$`,
      ...GATEWAY_WINGS.slice(0, i + 1)
        .filter((w) => w !== wing)
        .map((w) => `^gateway/${w}/`),
    ],
  },
}));

// The engine's wings in their import order (docs/architecture.md#folder-map,
// each wing's README): a wing imports only the wings after it; nothing in a
// wing imports the engine's root (main.ts, node-flags.ts), which starts the
// process; a folder under engine/ that is not in this list is refused until it
// is written in. `frontends/` sits high but imports only `api/`
// (frontends-only-api); `server/` wires the rest.
const ENGINE_WINGS = ['server', 'frontends', 'repository', 'backends', 'sharing', 'scheduling', 'config', 'tracing', 'shm', 'api'];
const UNLISTED_ENGINE_WING = `^engine/(?!(?:${ENGINE_WINGS.join('|')})/)[^/]+/`;
const engineWingRules = [
  ...ENGINE_WINGS.map((wing, i) => ({
    name: 'engine-wing-order',
    severity: 'error',
    comment: `engine/${wing}/ imports only the wings after it (${ENGINE_WINGS.slice(i + 1).join(', ') || 'none'}), never an earlier wing or the root`,
    from: { path: `^engine/${wing}/` },
    to: { path: ['^engine/[^/]+$', UNLISTED_ENGINE_WING, ...ENGINE_WINGS.slice(0, i).map((w) => `^engine/${w}/`)] },
  })),
  {
    name: 'engine-wing-order',
    severity: 'error',
    comment: `a folder under engine/ takes part in imports only once it has its place in the engine's wing order (${ENGINE_WINGS.join(' → ')})`,
    from: { path: UNLISTED_ENGINE_WING },
    to: { path: '^engine/' },
  },
];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...gatewayWingRules,
    ...engineWingRules,
    {
      // Two processes: the gateway talks to the engine over gRPC only (client/ and protocol/).
      name: 'gateway-not-engine',
      severity: 'error',
      comment: 'gateway/ never imports engine/: it reaches the engine through client/ over gRPC',
      from: { path: '^gateway/' },
      to: { path: '^engine/' },
    },
    {
      // The console is part of the gateway process; named apart because it renders engine data.
      name: 'console-not-engine',
      severity: 'error',
      comment: 'gateway/console/ never imports engine/: it reads the engine through the gateway engine client',
      from: { path: '^gateway/console/' },
      to: { path: '^engine/' },
    },
    {
      // Frontends see the engine only through its contract (our tritonserver.h).
      name: 'frontends-only-api',
      severity: 'error',
      comment: 'engine/frontends/ imports only engine/api/, protocol/, common/ and engine/frontends/ itself',
      from: { path: '^engine/frontends/' },
      to: { path: '^engine/', pathNot: ['^engine/api/', '^engine/frontends/'] },
    },
    {
      name: 'frontends-no-other-roots',
      severity: 'error',
      comment: 'engine/frontends/ reaches no top-level folder but protocol/ and common/ (and packages)',
      from: { path: '^engine/frontends/' },
      to: { path: '^(gateway|client|functions|scripts|deploy|test)/' },
    },
    {
      // The contract holds only types and small shared helpers; implementations depend on it, never the reverse.
      name: 'api-is-the-contract',
      severity: 'error',
      comment: 'engine/api/ imports only engine/api/, protocol/ and common/: the contract never reaches an implementation',
      from: { path: '^engine/api/' },
      to: { path: '^(engine/(?!api/)|gateway/|client/)' },
    },
    {
      // Backends execute models; they never know which protocol a request came in on.
      name: 'backends-not-frontends',
      severity: 'error',
      comment: 'engine/backends/ never imports engine/frontends/',
      from: { path: '^engine/backends/' },
      to: { path: '^engine/frontends/' },
    },
    {
      // The client library and the wire types are shared by both processes and by users.
      name: 'client-protocol-not-processes',
      severity: 'error',
      comment: 'client/ and protocol/ never import engine/ or gateway/',
      from: { path: '^(client|protocol)/' },
      to: { path: '^(engine|gateway)/' },
    },
    {
      // common/ sits under both processes.
      name: 'common-not-processes',
      severity: 'error',
      comment: 'common/ never imports engine/, gateway/ or client/',
      from: { path: '^common/' },
      to: { path: '^(engine|gateway|client)/' },
    },
    {
      // The engine is one process; it does not borrow the gateway's code.
      name: 'engine-not-gateway',
      severity: 'error',
      comment: 'engine/ never imports gateway/',
      from: { path: '^engine/' },
      to: { path: '^gateway/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'no import cycles anywhere: a cycle makes load order matter and hides which module owns what',
      from: {},
      to: { circular: true },
    },
    {
      // Folders too: a folder counts every file beneath it, and its imports are those leaving it.
      name: 'no-folder-cycle',
      severity: 'error',
      comment: 'no import cycles between folders: if folder A imports folder B, nothing in B reaches back into A',
      scope: 'folder',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)node_modules/|^native/build/' },
    tsPreCompilationDeps: true,
    parser: 'swc',
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.cjs', '.mjs', '.json', '.node'] },
  },
};
