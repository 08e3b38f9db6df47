// The layering rules in .dependency-cruiser.cjs (run by `npm run lint:deps`):
// the real tree passes, and a planted wrong import of each kind fails with a
// message naming the rule. Plants live in a temp tree shaped like the repo,
// cruised by the real dependency-cruiser with the real configuration.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../fixtures/source-scan.ts';

const BIN = path.join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const CONFIG = path.join(ROOT, '.dependency-cruiser.cjs');
const DIRS = ['engine', 'gateway', 'client', 'common', 'protocol', 'functions', 'scripts', 'deploy/tools'];
const temps: string[] = [];

function cruise(cwd: string, dirs: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [BIN, '--config', CONFIG, ...dirs], { cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/** A temp tree with the given files (path → source), plus the tsconfig the configuration reads. */
function plant(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'layering-'));
  temps.push(dir);
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', allowImportingTsExtensions: true, noEmit: true } }),
  );
  for (const [p, src] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    fs.writeFileSync(path.join(dir, p), src);
  }
  return dir;
}

const leaf = 'export const x = 1;\n';

afterAll(() => {
  for (const d of temps) fs.rmSync(d, { recursive: true, force: true });
});

describe('layering (dependency-cruiser)', () => {
  it('the project itself has no violation and no cycle', () => {
    const r = cruise(ROOT, DIRS);
    expect(r.out).toContain('no dependency violations found');
    expect(r.status).toBe(0);
  });

  const cases: Array<{ rule: string; files: Record<string, string>; from: string }> = [
    {
      rule: 'gateway-not-engine',
      from: 'gateway/app.ts',
      files: { 'gateway/app.ts': "import { x } from '../engine/api/status.ts';\nexport const y = x;\n", 'engine/api/status.ts': leaf },
    },
    {
      rule: 'console-not-engine',
      from: 'gateway/console/page.ts',
      files: {
        'gateway/console/page.ts': "import type { x } from '../../engine/server/server.ts';\nexport type Y = typeof x;\n",
        'engine/server/server.ts': leaf,
      },
    },
    {
      rule: 'frontends-only-api',
      from: 'engine/frontends/grpc/grpc-server.ts',
      files: {
        'engine/frontends/grpc/grpc-server.ts': "import { x } from '../../scheduling/instance-pool.ts';\nexport const y = x;\n",
        'engine/scheduling/instance-pool.ts': leaf,
      },
    },
    {
      rule: 'api-is-the-contract',
      from: 'engine/api/sharing-status.ts',
      files: {
        'engine/api/sharing-status.ts': "import type { x } from '../sharing/response-cache.ts';\nexport type Y = typeof x;\n",
        'engine/sharing/response-cache.ts': leaf,
      },
    },
    {
      rule: 'backends-not-frontends',
      from: 'engine/backends/js/js-backend.ts',
      files: {
        'engine/backends/js/js-backend.ts': "import { x } from '../../frontends/http/http-util.ts';\nexport const y = x;\n",
        'engine/frontends/http/http-util.ts': leaf,
      },
    },
    {
      rule: 'client-protocol-not-processes',
      from: 'client/grpc-client.ts',
      files: {
        'client/grpc-client.ts': "import { x } from '../gateway/core/errors.ts';\nexport const y = x;\n",
        'gateway/core/errors.ts': leaf,
      },
    },
    {
      rule: 'client-protocol-not-processes',
      from: 'protocol/index.ts',
      files: { 'protocol/index.ts': "import { x } from '../engine/api/status.ts';\nexport const y = x;\n", 'engine/api/status.ts': leaf },
    },
    {
      rule: 'common-not-processes',
      from: 'common/logger.ts',
      files: { 'common/logger.ts': "import { x } from '../engine/api/status.ts';\nexport const y = x;\n", 'engine/api/status.ts': leaf },
    },
    {
      rule: 'engine-not-gateway',
      from: 'engine/main.ts',
      files: { 'engine/main.ts': "import { x } from '../gateway/core/errors.ts';\nexport const y = x;\n", 'gateway/core/errors.ts': leaf },
    },
    // The gateway's wings: each imports only the wings after it (core/ last), never an earlier one or the root.
    {
      rule: 'gateway-wing-order',
      from: 'gateway/core/errors.ts',
      files: {
        'gateway/core/errors.ts': "import { x } from '../calls/invoke.ts';\nexport const y = x;\n",
        'gateway/calls/invoke.ts': leaf,
      },
    },
    {
      rule: 'gateway-wing-order',
      from: 'gateway/calls/invoke.ts',
      files: {
        'gateway/calls/invoke.ts': "import type { x } from '../http/direct-call.ts';\nexport type Y = typeof x;\n",
        'gateway/http/direct-call.ts': leaf,
      },
    },
    {
      rule: 'gateway-wing-order',
      from: 'gateway/webhooks/delivery.ts',
      files: {
        'gateway/webhooks/delivery.ts': "import { x } from '../jobs/job-runner.ts';\nexport const y = x;\n",
        'gateway/jobs/job-runner.ts': leaf,
      },
    },
    {
      rule: 'gateway-wing-order',
      from: 'gateway/console/console-api.ts',
      files: { 'gateway/console/console-api.ts': "import { x } from '../app.ts';\nexport const y = x;\n", 'gateway/app.ts': leaf },
    },
    // The engine's wings: each imports only the wings after it (server, frontends, repository, backends, sharing,
    // scheduling, config, tracing, shm, api), never an earlier one or the root; issue 38's two examples
    // first. (The edges fixed with these rules, sharing → repository and config → backends, fail 'the project itself'.)
    {
      rule: 'engine-wing-order',
      from: 'engine/scheduling/dynamic-batch-scheduler.ts',
      files: {
        'engine/scheduling/dynamic-batch-scheduler.ts': "import { x } from '../server/inference-server.ts';\nexport const y = x;\n",
        'engine/server/inference-server.ts': leaf,
      },
    },
    {
      rule: 'engine-wing-order',
      from: 'engine/config/model-config-loader.ts',
      files: {
        'engine/config/model-config-loader.ts': "import type { x } from '../frontends/http/http-server.ts';\nexport type Y = typeof x;\n",
        'engine/frontends/http/http-server.ts': leaf,
      },
    },
    {
      rule: 'engine-wing-order',
      from: 'engine/server/server.ts',
      files: { 'engine/server/server.ts': "import { x } from '../node-flags.ts';\nexport const y = x;\n", 'engine/node-flags.ts': leaf },
    },
    {
      rule: 'engine-wing-order',
      from: 'engine/tracing/trace-manager.ts',
      files: {
        'engine/tracing/trace-manager.ts': "import { x } from '../transport/socket.ts';\nexport const y = x;\n",
        'engine/transport/socket.ts': leaf,
      },
    },
    {
      rule: 'engine-wing-order',
      from: 'engine/transport/socket.ts',
      files: { 'engine/transport/socket.ts': "import { x } from '../api/status.ts';\nexport const y = x;\n", 'engine/api/status.ts': leaf },
    },
    // A folder cycle made of files that form no file cycle: a → b → c → d with a and d in one folder, b and c in another.
    {
      rule: 'no-folder-cycle',
      from: 'protocol/wire',
      files: {
        'protocol/wire/a.ts': "import { b } from '../codec/b.ts';\nexport const a = b;\n",
        'protocol/codec/b.ts': "import { c } from './c.ts';\nexport const b = c;\n",
        'protocol/codec/c.ts': "import { d } from '../wire/d.ts';\nexport const c = d;\n",
        'protocol/wire/d.ts': 'export const d = 1;\n',
      },
    },
    {
      rule: 'no-circular',
      from: 'engine/config/a.ts',
      files: {
        'engine/config/a.ts': "import { b } from './b.ts';\nexport const a = () => b;\n",
        'engine/config/b.ts': "import type { a } from './a.ts';\nexport const b = 1 as unknown as typeof a;\n",
      },
    },
  ];

  for (const c of cases) {
    it(`a planted import in ${c.from} fails rule ${c.rule}`, () => {
      const dir = plant(c.files);
      const roots = [...new Set(Object.keys(c.files).map((p) => p.split('/')[0]!))];
      const r = cruise(dir, roots);
      expect(r.status).not.toBe(0);
      expect(r.out).toContain(`error ${c.rule}: ${c.from}`);
    });
  }

  it('the planted folder cycle is no file cycle: only no-folder-cycle fires', () => {
    const c = cases.find((x) => x.rule === 'no-folder-cycle')!;
    const r = cruise(plant(c.files), ['protocol']);
    expect(r.out).not.toContain('no-circular');
    expect(r.out).toContain('error no-folder-cycle: protocol/codec');
  });

  it('the allowed imports pass: frontends → api/protocol/common, backends → api, engine wings → later wings, gateway → client/protocol/common, gateway wings → later wings', () => {
    const dir = plant({
      'engine/frontends/http/routes.ts':
        "import { a } from '../../api/status.ts';\nimport { p } from '../../../protocol/index.ts';\nimport { c } from '../../../common/logger.ts';\nexport const r = [a, p, c];\n",
      'engine/backends/js/js-backend.ts': "import { a } from '../../api/status.ts';\nexport const r = a;\n",
      'engine/api/status.ts': 'export const a = 1;\n',
      'engine/main.ts': "import { s } from './server/server.ts';\nexport const m = s;\n",
      'engine/server/server.ts':
        "import { r } from '../../engine/frontends/http/routes.ts';\nimport { l } from '../repository/loader.ts';\nexport const s = [r, l];\n",
      'engine/repository/loader.ts':
        "import { e } from '../backends/ensemble/ensemble-backend.ts';\nimport { b } from '../sharing/budget.ts';\nimport { m } from '../shm/manager.ts';\nexport const l = [e, b, m];\n",
      'engine/backends/ensemble/ensemble-backend.ts':
        "import { q } from '../../scheduling/ensemble-scheduler.ts';\nimport { b } from '../../sharing/budget.ts';\nexport const e = [q, b];\n",
      'engine/sharing/budget.ts': "import type { a } from '../api/status.ts';\nexport const b = 1 as unknown as typeof a;\n",
      'engine/scheduling/ensemble-scheduler.ts': "import { p } from '../config/plan.ts';\nexport const q = p;\n",
      'engine/config/plan.ts': "import { t } from '../tracing/trace.ts';\nexport const p = t;\n",
      'engine/tracing/trace.ts': "import { m } from '../shm/manager.ts';\nexport const t = m;\n",
      'engine/shm/manager.ts': "import { a } from '../api/status.ts';\nexport const m = a;\n",
      'protocol/index.ts': 'export const p = 1;\n',
      'common/logger.ts': 'export const c = 1;\n',
      'client/grpc-client.ts': "import { p } from '../protocol/index.ts';\nexport const g = p;\n",
      'gateway/app.ts':
        "import { g } from '../client/grpc-client.ts';\nimport { c } from '../common/logger.ts';\nimport { h } from './http/direct-call.ts';\nexport const r = [g, c, h];\n",
      'gateway/http/direct-call.ts': "import { i } from '../calls/invoke.ts';\nexport const h = i;\n",
      'gateway/calls/invoke.ts':
        "import { e } from '../core/errors.ts';\nimport { u } from '../upstream/engine-client.ts';\nexport const i = [e, u];\n",
      'gateway/upstream/engine-client.ts': "import { e } from '../core/errors.ts';\nexport const u = e;\n",
      'gateway/core/errors.ts': 'export const e = 1;\n',
    });
    const r = cruise(dir, ['engine', 'protocol', 'common', 'client', 'gateway']);
    expect(r.out).toContain('no dependency violations found');
    expect(r.status).toBe(0);
  });
});
