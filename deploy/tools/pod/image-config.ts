// An image's run-time configuration (OCI image config: Entrypoint, Cmd,
// User, WorkingDir, Env) and how Kubernetes turns a container spec into the
// process it starts: `command` replaces the image's ENTRYPOINT (and drops its
// CMD), `args` replaces CMD; `$(VAR)` in either is expanded with the
// container's environment. Also a reader of a Dockerfile's final stage, for
// running the image's configuration without building it.
import { expandReferences } from './env-vars.ts';

export interface ImageConfig {
  entrypoint: string[];
  cmd: string[];
  /** "uid", "uid:gid", or a name; empty: root. */
  user: string;
  workingDir: string;
  /** NAME=value */
  env: string[];
}

/** The argv Kubernetes runs for a container with `command` / `args` on an image with `image`'s config. */
export function containerArgv(
  image: ImageConfig,
  command: string[] | undefined,
  args: string[] | undefined,
  env: Map<string, string>,
): string[] {
  const lookup = (n: string) => env.get(n);
  const expand = (xs: string[]) => xs.map((x) => expandReferences(x, lookup));
  let argv: string[];
  if (command?.length) argv = [...expand(command), ...expand(args ?? [])];
  else if (args?.length) argv = [...image.entrypoint, ...expand(args)];
  else argv = [...image.entrypoint, ...image.cmd];
  if (!argv.length) throw new Error('no command: the container gives none and the image has neither ENTRYPOINT nor CMD');
  return argv;
}

/** Splits a Dockerfile into instructions (continuation lines joined, comments dropped). */
function instructions(text: string): Array<{ op: string; rest: string }> {
  const out: Array<{ op: string; rest: string }> = [];
  let acc = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!acc && (line.startsWith('#') || !line)) continue;
    if (line.startsWith('#')) continue;
    // Docker joins a continued line to the next as written: the backslash and newline go, the spaces stay.
    if (line.endsWith('\\')) {
      acc += raw.replace(/\\\s*$/, '');
      continue;
    }
    const full = (acc + raw).trim();
    acc = '';
    const m = /^(\w+)\s+(.*)$/s.exec(full);
    if (m) out.push({ op: m[1]!.toUpperCase(), rest: m[2]!.trim() });
  }
  return out;
}

/** Exec form (a JSON array) as is; shell form run by /bin/sh -c, as Docker does. */
const execOrShell = (rest: string): string[] => (rest.startsWith('[') ? (JSON.parse(rest) as string[]) : ['/bin/sh', '-c', rest]);

/** `ENV a=b c="d e"` or the legacy `ENV a b c`. */
function envPairs(rest: string): Array<[string, string]> {
  if (!/^[^\s=]+=/.test(rest)) {
    const m = /^(\S+)\s+(.*)$/s.exec(rest);
    return m ? [[m[1]!, m[2]!]] : [];
  }
  const out: Array<[string, string]> = [];
  for (const m of rest.matchAll(/([^\s=]+)=("((?:[^"\\]|\\.)*)"|\S*)/g))
    out.push([m[1]!, m[3] !== undefined ? m[3].replace(/\\(.)/g, '$1') : m[2]!]);
  return out;
}

/**
 * The configuration of a Dockerfile's final stage, on top of `base` (the
 * config of the image its FROM names). Docker's rule: an ENTRYPOINT set in
 * a stage clears the CMD inherited from the base.
 */
export function dockerfileImageConfig(text: string, base: ImageConfig): ImageConfig {
  const all = instructions(text);
  const lastFrom = all.map((i) => i.op).lastIndexOf('FROM');
  const cfg: ImageConfig = { ...base, entrypoint: [...base.entrypoint], cmd: [...base.cmd], env: [...base.env] };
  let cmdSetHere = false;
  for (const { op, rest } of all.slice(lastFrom + 1)) {
    if (op === 'ENTRYPOINT') {
      cfg.entrypoint = execOrShell(rest);
      if (!cmdSetHere) cfg.cmd = [];
    } else if (op === 'CMD') {
      cfg.cmd = execOrShell(rest);
      cmdSetHere = true;
    } else if (op === 'USER') cfg.user = rest;
    else if (op === 'WORKDIR') cfg.workingDir = rest.startsWith('/') ? rest : `${cfg.workingDir.replace(/\/$/, '')}/${rest}`;
    else if (op === 'ENV') {
      for (const [k, v] of envPairs(rest)) {
        cfg.env = cfg.env.filter((e) => !e.startsWith(`${k}=`));
        cfg.env.push(`${k}=${v}`);
      }
    }
  }
  return cfg;
}

/** Debian's container images (debian:bookworm-slim): PATH set, `bash` as CMD, root. */
export const DEBIAN_BASE_CONFIG: ImageConfig = {
  entrypoint: [],
  cmd: ['bash'],
  user: '',
  workingDir: '/',
  env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
};
