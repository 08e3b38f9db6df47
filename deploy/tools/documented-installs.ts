// The `helm install` commands the docs show for our chart, turned into
// `helm template` arguments, so `npm run deploy:check` renders exactly what a
// reader would install. A command substitution such as `$(openssl rand -hex 24)`
// stands in as a fixed 48-character hex string.
import fs from 'node:fs';
import path from 'node:path';

export interface DocumentedInstall {
  /** file:line of the command. */
  where: string;
  release: string;
  /** Everything after the chart path, split as a shell would. */
  args: string[];
}

const CHART = 'deploy/helm/tritonish';
const SUBSTITUTED = 'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4';

/** Shell words of `line`: whitespace-separated, single and double quotes honoured, `$(...)` replaced. */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let cur: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '$' && line[i + 1] === '(') {
      let depth = 0;
      let j = i + 1;
      for (; j < line.length; j++) {
        if (line[j] === '(') depth++;
        else if (line[j] === ')' && --depth === 0) break;
      }
      cur = (cur ?? '') + SUBSTITUTED;
      i = j;
    } else if (c === "'" || c === '"') {
      const end = line.indexOf(c, i + 1);
      if (end < 0) throw new Error(`unterminated ${c} in: ${line}`);
      cur = (cur ?? '') + line.slice(i + 1, end);
      i = end;
    } else if (/\s/.test(c)) {
      if (cur !== undefined) words.push(cur);
      cur = undefined;
    } else if (c === '#' && cur === undefined) {
      break; // a comment
    } else {
      cur = (cur ?? '') + c;
    }
  }
  if (cur !== undefined) words.push(cur);
  return words;
}

/** Every `helm install|upgrade [--install] RELEASE deploy/helm/tritonish ...` in the fenced code blocks of `files` (paths relative to `root`). */
export function documentedInstalls(root: string, files: string[]): DocumentedInstall[] {
  const out: DocumentedInstall[] = [];
  for (const rel of files) {
    const file = path.join(root, rel);
    if (!fs.existsSync(file)) continue;
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    let fenced = false;
    for (let i = 0; i < lines.length; i++) {
      if (/^\s*```/.test(lines[i]!)) {
        fenced = !fenced;
        continue;
      }
      if (!fenced) continue;
      const start = i;
      let cmd = lines[i]!;
      while (cmd.endsWith('\\') && i + 1 < lines.length) cmd = `${cmd.slice(0, -1)} ${lines[++i]!.trim()}`;
      const words = shellWords(cmd.trim());
      if (words[0] !== 'helm' || !['install', 'upgrade'].includes(words[1]!)) continue;
      const rest = words.slice(2).filter((w) => w !== '--install');
      const at = rest.indexOf(CHART);
      if (at !== 1) continue; // another chart (e.g. the Prometheus Adapter's)
      out.push({ where: `${rel}:${start + 1}`, release: rest[0]!, args: rest.slice(2) });
    }
  }
  return out;
}

/** The Markdown files that document deploys: the README and everything under docs/. */
export function docFiles(root: string): string[] {
  const docs = path.join(root, 'docs');
  const walk = (dir: string): string[] =>
    fs
      .readdirSync(dir, { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.md') ? [path.join(dir, e.name)] : []));
  return [
    'README.md',
    ...(fs.existsSync(docs)
      ? walk(docs)
          .map((f) => path.relative(root, f))
          .sort()
      : []),
  ];
}
