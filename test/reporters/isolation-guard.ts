// Setup file: the test groups run without vitest's `isolate` (vitest.config.ts),
// so a file shares its worker process with the files before and after it.
// What one file leaves in the process changes what the next one sees; this
// guard fails the file that changed the environment or left fake timers on,
// naming what it left, instead of a later file failing for no reason of its own.
import { afterAll, vi } from 'vitest';

const env0 = { ...process.env };
/** Set by a library when it first loads, once per process, not by a test: sharp (libvips) sets VIPSHOME. */
const SET_BY_LIBRARIES = new Set(['VIPSHOME']);

/** The variables a file added, removed or changed, as `NAME` lines. */
export function envChanges(before: NodeJS.ProcessEnv, after: NodeJS.ProcessEnv): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((k) => before[k] !== after[k] && !SET_BY_LIBRARIES.has(k)).sort();
}

afterAll(() => {
  const changed = envChanges(env0, process.env);
  const fake = vi.isFakeTimers();
  if (fake) vi.useRealTimers();
  for (const k of changed) {
    if (env0[k] === undefined) delete process.env[k];
    else process.env[k] = env0[k];
  }
  if (changed.length || fake)
    throw new Error(
      `this file left process-wide state for the next file in its worker (tests run without isolate):` +
        (changed.length ? ` environment variables ${changed.join(', ')} not restored;` : '') +
        (fake ? ' fake timers left on;' : ''),
    );
});
