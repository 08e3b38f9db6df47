// Applies the file moves listed in MOVES.md (issue 38): `git mv` for each old
// path still present, then rewrites every reference to an old path across the
// repository. Idempotent; see MOVES.md for when to pass --no-git-mv.
//
//   node scripts/apply-moves.mjs              move, then rewrite references
//   node scripts/apply-moves.mjs --no-git-mv  rewrite references only
//   node scripts/apply-moves.mjs --check      print what would change; exit 1 if anything would
//
// A reference is a path-like token ending in .ts/.js/.mjs/.cjs:
//   - relative (`./x.ts`, `../gateway/x.ts`): resolved from the file's folder;
//     a file that was itself moved resolves a specifier that names nothing
//     from its new folder against its old folder instead (so its imports of
//     old neighbours, and of untouched files, follow it);
//   - rooted (`gateway/x.ts`, `dist/net/h2/x.js`): matched from a top-level
//     source folder (ROOTED) when nothing but a build folder comes before it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = new Set(process.argv.slice(2));
const CHECK = args.has('--check');
const GIT_MV = !args.has('--no-git-mv') && !CHECK;
const TEXT = /\.(ts|mts|cts|js|mjs|cjs|json|md|ya?ml|sh|txt|tpl|cc|h)$|(^|\/)Dockerfile[^/]*$/;
const SCRIPT_EXT = /\.(ts|js|mjs|cjs)$/;
/** Files that name old paths on purpose: the table itself and the script's test. */
const KEEP = new Set(['MOVES.md', 'test/unit/apply-moves.test.ts']);
/** Top-level folders whose files MOVES.md may move, matched as rooted paths. */
const ROOTED = ['gateway', 'engine', 'client', 'common', 'protocol', 'net'];
const ROOTED_RE = new RegExp(`^((?:[\\w.@-]*\\/)*dist\\/|\\/?)(?:${ROOTED.join('|')})\\/`);

/** The table in MOVES.md: old repo-relative path -> new one. */
export function readMoves(file = path.join(ROOT, 'MOVES.md')) {
  const moves = new Map();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^\|\s*([\w./-]+\.\w+)\s*\|\s*([\w./-]+\.\w+)\s*\|\s*$/.exec(line);
    if (m) moves.set(m[1], m[2]);
  }
  const news = new Set(moves.values());
  for (const old of moves.keys()) if (news.has(old)) throw new Error(`MOVES.md: ${old} is both an old and a new path`);
  return moves;
}

const posix = (p) => p.split(path.sep).join('/');
const exists = (rel) => fs.existsSync(path.join(ROOT, rel));

function relSpecifier(fromDir, target) {
  let r = path.posix.relative(fromDir, target);
  if (!r.startsWith('.')) r = `./${r}`;
  return r;
}

/** The table entry a path names, trying `.ts` for a `.js` spelling (compiled or ESM-style imports). */
function lookup(moves, rel) {
  if (moves.has(rel)) return { to: moves.get(rel), ext: '' };
  const js = /\.js$/.exec(rel);
  if (js && moves.has(rel.replace(/\.js$/, '.ts'))) return { to: moves.get(rel.replace(/\.js$/, '.ts')), ext: '.js' };
  return undefined;
}

const withExt = (p, ext) => (ext ? p.replace(/\.ts$/, ext) : p);

/** The new spelling of one token found in `file`, or undefined when it stays. */
export function rewriteToken(moves, oldOf, file, token) {
  const dir = path.posix.dirname(file);
  if (token.startsWith('./') || token.startsWith('../')) {
    const here = path.posix.normalize(path.posix.join(dir, token));
    const hit = lookup(moves, here);
    if (hit) return relSpecifier(dir, withExt(hit.to, hit.ext));
    const oldFile = oldOf.get(file);
    if (!oldFile || exists(here) || exists(here.replace(/\.js$/, '.ts'))) return undefined;
    const there = path.posix.normalize(path.posix.join(path.posix.dirname(oldFile), token));
    const moved = lookup(moves, there);
    if (moved) return relSpecifier(dir, withExt(moved.to, moved.ext));
    if (exists(there) || exists(there.replace(/\.js$/, '.ts'))) return relSpecifier(dir, there);
    return undefined;
  }
  // Rooted: `protocol/...` itself, or under a build folder (`dist/protocol/...`, `/app/dist/gateway/...`).
  const m = ROOTED_RE.exec(token);
  if (!m) return undefined;
  const start = m[1].length;
  const hit = lookup(moves, token.slice(start));
  return hit ? token.slice(0, start) + withExt(hit.to, hit.ext) : undefined;
}

/** `text` with every reference to an old path rewritten, as seen from repo-relative `file`. */
export function rewriteText(moves, oldOf, file, text) {
  return text.replace(/[\w.@/-]+/g, (token) => {
    const core = token.replace(/[.]+$/, '');
    if (!SCRIPT_EXT.test(core)) return token;
    const next = rewriteToken(moves, oldOf, file, core);
    return next === undefined ? token : next + token.slice(core.length);
  });
}

function trackedFiles() {
  const out = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: ROOT, encoding: 'utf8' });
  return out.split('\0').filter((f) => f && TEXT.test(f) && !KEEP.has(f) && exists(f));
}

function main() {
  const moves = readMoves();
  const oldOf = new Map([...moves].map(([o, n]) => [n, o]));
  let moved = 0;
  for (const [from, to] of moves) {
    if (!exists(from)) continue;
    if (exists(to)) throw new Error(`${from} and ${to} both exist: merge them by hand, then rerun`);
    if (!GIT_MV) {
      if (CHECK) console.log(`would move ${from} -> ${to}`);
      moved += CHECK ? 1 : 0;
      continue;
    }
    fs.mkdirSync(path.dirname(path.join(ROOT, to)), { recursive: true });
    execFileSync('git', ['mv', from, to], { cwd: ROOT });
    moved++;
  }
  let changed = 0;
  for (const file of trackedFiles()) {
    const abs = path.join(ROOT, file);
    const text = fs.readFileSync(abs, 'utf8');
    const next = rewriteText(moves, oldOf, posix(file), text);
    if (next === text) continue;
    changed++;
    if (CHECK) console.log(`would rewrite ${file}`);
    else fs.writeFileSync(abs, next);
  }
  console.log(`${CHECK ? 'pending' : 'done'}: ${moved} moved, ${changed} files rewritten`);
  if (CHECK && moved + changed > 0) process.exit(1);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
