// Where a client may make the engine write: a file named over the API
// (trace_file, log_file) must lie under the folder the operator gave for it
// at start (--trace-dir, --log-dir). Relative names are taken from that
// folder; '..' segments, absolute names elsewhere and symbolic links on the
// way (the folder itself excepted: the operator chose it) are refused. The
// writer then opens the file with O_NOFOLLOW, so a link planted after this
// check is not followed either.
import fs from 'node:fs';
import path from 'node:path';
import { invalidArg } from './status.ts';

/** `O_NOFOLLOW` where the platform has it (Linux, macOS), else 0. */
export const O_NOFOLLOW = fs.constants.O_NOFOLLOW ?? 0;

/**
 * The absolute path the client's `name` (setting `setting`) stands for under
 * `dir`; throws INVALID_ARG naming the setting and the reason otherwise.
 */
export function fileUnder(dir: string, name: string, setting: string, flag: string): string {
  const bad = (why: string) => invalidArg(`${setting} '${name}' ${why}`);
  if (name.includes('\0')) throw bad('contains a NUL character');
  if (name.split(/[\\/]/).includes('..')) throw bad(`must not contain '..'`);
  let root: string;
  try {
    root = fs.realpathSync(dir);
  } catch {
    throw bad(`cannot be used: the folder given with ${flag} does not exist`);
  }
  const full = path.resolve(root, name);
  const rel = path.relative(root, full);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) throw bad(`is not under the folder given with ${flag}`);
  // Every existing step below the root: a plain folder, and the file itself no link.
  let at = root;
  const parts = rel.split(path.sep);
  for (let i = 0; i < parts.length; i++) {
    at = path.join(at, parts[i]!);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(at);
    } catch {
      if (i < parts.length - 1) throw bad(`names a folder that does not exist under the folder given with ${flag}`);
      break;
    }
    if (st.isSymbolicLink()) throw bad('passes through a symbolic link');
    if (i < parts.length - 1 ? !st.isDirectory() : !st.isFile())
      throw bad(i < parts.length - 1 ? 'names a folder that is a file' : 'is not a regular file');
  }
  return full;
}
