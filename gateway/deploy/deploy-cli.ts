// `npm run deploy -- functions/ --gateway=http://127.0.0.1:8080 [--token=T]
//  [--version=V] [--dry-run]`: read every *.json in a folder as one bundle and
// PUT it to the gateway's /admin/functions (GATEWAY_ADMIN_TOKEN works for
// --token). The gateway validates the whole bundle; a refusal prints every
// error and exits 1; nothing changes on the gateway then.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const USAGE = 'usage: deploy <folder> --gateway=URL [--token=TOKEN | GATEWAY_ADMIN_TOKEN] [--version=V] [--rollback]';

export interface DeployArgs {
  folder?: string;
  gateway: string;
  token?: string;
  version?: string;
  rollback: boolean;
}

export function parseDeployArgs(argv: string[], env = process.env): DeployArgs {
  const a: Partial<DeployArgs> = { rollback: false, token: env.GATEWAY_ADMIN_TOKEN };
  for (const arg of argv) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m) {
      if (a.folder) throw new Error(`unexpected argument '${arg}'\n${USAGE}`);
      a.folder = arg;
      continue;
    }
    const [, k, v] = m;
    if (k === 'gateway' && v) a.gateway = v.replace(/\/+$/, '');
    else if (k === 'token' && v) a.token = v;
    else if (k === 'version' && v) a.version = v;
    else if (k === 'rollback') a.rollback = true;
    else throw new Error(`unknown or empty flag --${k}\n${USAGE}`);
  }
  if (!a.gateway) throw new Error(`--gateway=URL is required\n${USAGE}`);
  if (!a.folder && !a.rollback) throw new Error(`a folder of function definitions is required\n${USAGE}`);
  return a as DeployArgs;
}

/** The bundle a folder stands for: every *.json (name order), parsed but not validated (the gateway does that). */
export function readBundle(folder: string, version?: string): { version?: string; functions: unknown[] } {
  const files = fs
    .readdirSync(folder)
    .filter((f) => f.endsWith('.json'))
    .sort();
  const functions = files.map((f) => {
    const full = path.join(folder, f);
    try {
      return JSON.parse(fs.readFileSync(full, 'utf8')) as unknown;
    } catch (e) {
      throw new Error(`${full}: not valid JSON: ${(e as Error).message}`);
    }
  });
  return { ...(version ? { version } : {}), functions };
}

/** Run the deploy; returns the exit code and prints what happened. */
export async function runDeploy(a: DeployArgs, out: (line: string) => unknown = (s) => process.stdout.write(`${s}\n`)): Promise<number> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (a.token) headers.Authorization = `Bearer ${a.token}`;
  const res = a.rollback
    ? await fetch(`${a.gateway}/admin/functions/rollback`, { method: 'POST', headers })
    : await fetch(`${a.gateway}/admin/functions`, { method: 'PUT', headers, body: JSON.stringify(readBundle(a.folder!, a.version)) });
  const text = await res.text();
  let body: { version?: string; functions?: unknown[]; error?: { code: string; message: string; errors?: string[] } } = {};
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: printed below
  }
  if (res.ok) {
    out(`${a.rollback ? 'rolled back to' : 'deployed'} version ${body.version} (${body.functions?.length ?? 0} functions)`);
    return 0;
  }
  out(`refused (HTTP ${res.status}): ${body.error ? `${body.error.code}: ${body.error.message}` : text}`);
  for (const e of body.error?.errors ?? []) out(`  ${e}`);
  return 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  let args: DeployArgs;
  try {
    args = parseDeployArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    process.exit(2);
  }
  runDeploy(args).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`deploy failed: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
