// Model names as they may reach the disk and the wire. A model name becomes a
// folder under the repository (or under a load's temp dir), so it is checked
// at every entry point before anything touches the disk: no path separator,
// no '.'/'..', no NUL or control character, bounded length. Names echoed back
// in error texts are shortened so one absurd name cannot blow up a reply.
import { invalidArg } from '../api/status.ts';

/** Longest model name accepted (bytes of UTF-8; a Linux file name holds 255). */
export const MAX_MODEL_NAME_BYTES = 255;
/** Longest piece of client-chosen text quoted back in an error message. */
export const MAX_ECHO_CHARS = 128;

/** `s` shortened for quoting in an error text, with how much was cut. */
export function echo(s: string, max = MAX_ECHO_CHARS): string {
  const str = String(s);
  return str.length <= max ? str : `${str.slice(0, max)}...(${str.length - max} more characters)`;
}

/** Why `name` cannot be a model name, or undefined when it can. */
export function modelNameProblem(name: string): string | undefined {
  if (typeof name !== 'string' || name.length === 0) return 'is empty';
  if (Buffer.byteLength(name) > MAX_MODEL_NAME_BYTES) return `is longer than ${MAX_MODEL_NAME_BYTES} bytes`;
  if (name === '.' || name === '..') return 'is a relative path';
  if (/[/\\]/.test(name)) return 'contains a path separator';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'contains a NUL or control character';
  return undefined;
}

/** Throw INVALID_ARG unless `name` is a safe model name. */
export function checkModelName(name: string): void {
  const problem = modelNameProblem(name);
  if (problem) throw invalidArg(`invalid model name '${echo(name)}': ${problem}`);
}
