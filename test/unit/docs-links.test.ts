// The README is the front door and docs/ holds the rest: every relative link
// in README.md, docs/**/*.md and the folder READMEs must reach a file in the
// repository (and a heading, when it names one), and the paths and test
// suites the pages name in code spans must exist, so a move that forgets the
// docs fails here. The README stays short and starts with the two commands.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { USAGE as ENGINE_USAGE } from '../../engine/server/cli-options.ts';
import { GATEWAY_FLAGS, USAGE as GATEWAY_USAGE } from '../../gateway/main.ts';
import { GATEWAY_TRANSPORT_FLAGS } from '../../gateway/core/transport-options.ts';

const ROOT = path.resolve(fileURLToPath(new URL('../..', import.meta.url)));
// Ignored folders of fetched or built things (Node 24 for CI, Helm, dist/) hold other projects' pages.
const SKIP_DIRS = new Set(['node_modules', '.git', 'test-artifacts', 'bench-results', '.cache', '.tools', 'dist']);
/** Top-level folders whose paths the docs name in code spans. */
const TREE_ROOTS = [
  'engine',
  'gateway',
  'client',
  'common',
  'protocol',
  'net',
  'native',
  'scripts',
  'deploy',
  'test',
  'docs',
  'functions',
  'model_repository',
  'examples',
];

/** README.md, docs/**, and every other Markdown file of ours (folder READMEs). */
function markdownFiles(dir = ROOT): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      // Bench reports are generated output, not pages.
      if (SKIP_DIRS.has(e.name) || path.relative(ROOT, p) === path.join('test', 'bench', 'results')) continue;
      out.push(...markdownFiles(p));
    } else if (e.name.endsWith('.md')) out.push(p);
  }
  return out;
}

/** The text with fenced code blocks blanked (line numbers kept). */
function withoutFences(md: string): string {
  let inFence = false;
  return md
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        inFence = !inFence;
        return '';
      }
      return inFence ? '' : line;
    })
    .join('\n');
}

const withoutCodeSpans = (s: string) => s.replace(/`[^`\n]*`/g, '');

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to '-', repeats numbered. */
function headingAnchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of withoutFences(md).split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const text = m[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*]/g, '');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of md.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

/** Every link target in the page: inline links and images, and reference definitions. */
function linkTargets(md: string): string[] {
  const text = withoutCodeSpans(withoutFences(md));
  const out: string[] = [];
  for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push(m[1]!);
  for (const m of text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) out.push(m[1]!);
  return out;
}

/** Why a link from `file` to `target` is broken, or undefined when it resolves. */
function brokenLink(file: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // http:, mailto:, ...
  const [rawPath, anchor] = target.split('#', 2) as [string, string | undefined];
  const dest = rawPath === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(rawPath));
  const rel = path.relative(ROOT, dest);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return 'points outside the repository';
  if (!fs.existsSync(dest)) return 'no such file';
  if (anchor && dest.endsWith('.md') && !headingAnchors(fs.readFileSync(dest, 'utf8')).has(anchor)) {
    return `no heading '#${anchor}' in ${path.relative(ROOT, dest)}`;
  }
  return undefined;
}

/** Code spans that name a path of the tree (`engine/...`, `test/...`), without wildcards or placeholders. */
function treePaths(md: string): string[] {
  const out: string[] = [];
  const re = new RegExp(`^(?:${TREE_ROOTS.join('|')})/[A-Za-z0-9_./-]*$`);
  for (const m of withoutFences(md).matchAll(/`([^`\n]+)`/g)) if (re.test(m[1]!)) out.push(m[1]!);
  return out;
}

/** Every test file name under test/, for `unit/x` and `L0_x` mentions (suites may move into subfolders). */
function testFileNames(dir = path.join(ROOT, 'test')): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory() ? testFileNames(path.join(dir, e.name)) : e.name.endsWith('.test.ts') ? [e.name.slice(0, -'.test.ts'.length)] : [],
    );
}

const pages = markdownFiles();
const rel = (f: string) => path.relative(ROOT, f);

describe('docs', () => {
  it('covers the README, docs/ and the folder READMEs', () => {
    const names = pages.map(rel);
    expect(names).toContain('README.md');
    expect(names).toContain(path.join('docs', 'README.md'));
    expect(names).toContain(path.join('gateway', 'README.md'));
  });

  it('every relative link resolves to a file (and heading) inside the repository', () => {
    const broken: string[] = [];
    for (const f of pages) {
      for (const t of linkTargets(fs.readFileSync(f, 'utf8'))) {
        const why = brokenLink(f, t);
        if (why) broken.push(`${rel(f)}: (${t}) ${why}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('every path the pages name in code spans exists', () => {
    const missing: string[] = [];
    for (const f of pages) {
      for (const p of treePaths(fs.readFileSync(f, 'utf8'))) if (!fs.existsSync(path.join(ROOT, p))) missing.push(`${rel(f)}: ${p}`);
    }
    expect(missing).toEqual([]);
  });

  it('every test suite the pages name exists (unit/x, L0_x)', () => {
    const names = new Set(testFileNames());
    const all = [...names];
    const missing: string[] = [];
    for (const f of pages) {
      const text = fs.readFileSync(f, 'utf8');
      for (const m of text.matchAll(/`(?:unit\/([a-z0-9-]+)(\*)?|(L0_[a-z0-9_]+))`/g)) {
        const [, unit, star, l0] = m;
        const ok = l0 ? names.has(l0) : star ? all.some((n) => n.startsWith(unit!)) : names.has(unit!);
        if (!ok) missing.push(`${rel(f)}: ${m[0]}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('no page points at files outside the repository', () => {
    const outside = /\.\.\/shared\b|\/work\/|\b(?:DEVELOPERS|FACTS|STYLE|ARCHITECTURE)\.md\b/;
    const hits = pages.flatMap((f) =>
      fs
        .readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line, i) => (outside.test(line) ? [`${rel(f)}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(hits).toEqual([]);
  });

  it('README.md is a front door: at most 150 lines, starting with the two set-up commands', () => {
    const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').replace(/\n$/, '').split('\n');
    expect(lines.length).toBeLessThanOrEqual(150);
    const body = lines.filter((l) => l.trim() !== '' && !l.startsWith('# '));
    expect(body[0]).toMatch(/^```/);
    expect(body[1]).toMatch(/^npm install && npm start(\s|$)/);
    expect(body[2]).toMatch(/^npm test(\s|$)/);
  });
});

describe('docs/reference.md', () => {
  it('names every engine and gateway flag', () => {
    const ref = fs.readFileSync(path.join(ROOT, 'docs', 'reference.md'), 'utf8');
    const engine = [...ENGINE_USAGE.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!);
    const gateway = [...Object.keys(GATEWAY_FLAGS), ...Object.values(GATEWAY_TRANSPORT_FLAGS)];
    expect(engine.length).toBeGreaterThan(20);
    expect(gateway.length).toBeGreaterThan(25);
    const missing = [...new Set([...engine, ...gateway])].filter((f) => !ref.includes(`--${f}`));
    expect(missing).toEqual([]);
  });

  it("the gateway's usage line names every gateway flag", () => {
    const named = new Set([...GATEWAY_USAGE.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!));
    const gateway = [...Object.keys(GATEWAY_FLAGS), ...Object.values(GATEWAY_TRANSPORT_FLAGS)];
    expect(gateway.filter((f) => !named.has(f))).toEqual([]);
  });
});

describe('heading anchors', () => {
  it("follows GitHub's rules", () => {
    const a = headingAnchors(
      "# Getting started\n## OCR: `POST /fn/ocr`\n## Response cache (Triton's)\n## Notes\n## Notes\n```\n# not a heading\n```\n",
    );
    expect([...a]).toEqual(['getting-started', 'ocr-post-fnocr', 'response-cache-tritons', 'notes', 'notes-1']);
  });
});
