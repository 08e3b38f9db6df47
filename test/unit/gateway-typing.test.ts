// The gateway's Hono context is typed (gateway/core/gateway-env.ts): no `as never`
// cast stands in for it, nor anywhere else in the sources. A planted cast
// shows the scan finds one.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { asNeverLines, rel, sourceFiles } from '../fixtures/source-scan.ts';

describe('gateway typing', () => {
  it('the scan finds an `as never` cast and ignores one in a comment', () => {
    const src = ["c.set('fn' as never, name as never);", '// no `as never` here', 'const t = c.get("transfer");', 'x = y as  never;'].join(
      '\n',
    );
    expect(asNeverLines(src)).toEqual([1, 4]);
  });

  it('no `as never` in any source (gateway, engine, client, common, protocol, functions, scripts, deploy/tools)', () => {
    const found = sourceFiles(['gateway', 'engine', 'client', 'common', 'protocol', 'net', 'functions', 'scripts', 'deploy/tools']).flatMap(
      (f) => asNeverLines(fs.readFileSync(f, 'utf8')).map((l) => `${rel(f)}:${l}`),
    );
    expect(found).toEqual([]);
  });
});
