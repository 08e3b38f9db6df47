// scripts/apply-moves.mjs on the real MOVES.md: how a branch that still names
// old paths is fixed after merging the moves (`--no-git-mv`). Rooted paths
// are matched under every top-level source folder, not just gateway/.
import { describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs script without declarations
import { readMoves, rewriteText, rewriteToken } from '../../scripts/apply-moves.mjs';

type Moves = Map<string, string>;
const moves = readMoves() as Moves;
const oldOf = new Map([...moves].map(([o, n]) => [n, o]));
const token = (file: string, t: string) => rewriteToken(moves, oldOf, file, t) as string | undefined;

describe('apply-moves', () => {
  it('rooted paths under protocol/, common/, client/ and engine/ follow their move into net/', () => {
    expect(token('docs/engine/h2-front.md', 'protocol/h2-connection.ts')).toBe('net/h2/h2-connection.ts');
    expect(token('docs/x.md', 'common/http1-front.ts')).toBe('net/http1/http1-front.ts');
    expect(token('docs/x.md', 'client/local-infer-channel.ts')).toBe('net/local/local-infer-channel.ts');
    expect(token('docs/x.md', 'engine/frontends/grpc/grpc-js-relay.ts')).toBe('net/h2/grpc-js-relay.ts');
    expect(token('deploy/x.yaml', '/app/dist/protocol/http2-settings.js')).toBe('/app/dist/net/h2/http2-settings.js');
    expect(token('docs/x.md', 'gateway/errors.ts')).toBe('gateway/core/errors.ts');
  });

  it('leaves unmoved paths and look-alikes alone', () => {
    expect(token('docs/x.md', 'protocol/grpc-framing.ts')).toBeUndefined();
    expect(token('docs/x.md', 'xprotocol/h2-frames.ts')).toBeUndefined();
    expect(token('docs/x.md', 'test/protocol/h2-frames.ts')).toBeUndefined();
  });

  it("rewrites a relative import of an old path from the importer's folder", () => {
    const src = "import { H2Stream } from '../../../protocol/h2-stream.ts';\nimport { x } from '../../../protocol/index.ts';\n";
    expect(rewriteText(moves, oldOf, 'engine/frontends/grpc/grpc-h2-front.ts', src)).toBe(
      "import { H2Stream } from '../../../net/h2/h2-stream.ts';\nimport { x } from '../../../protocol/index.ts';\n",
    );
    expect(rewriteText(moves, oldOf, 'client/grpc-client.ts', "from './grpc-direct-unary.ts'")).toBe(
      "from '../net/h2/grpc-direct-unary.ts'",
    );
  });

  it("a moved file's import of an old neighbour that stayed is resolved from where it used to live", () => {
    // net/http1/http1-front.ts imported './logger.ts'; as net/http1/http1-front.ts that names common/logger.ts.
    expect(token('net/http1/http1-front.ts', './logger.ts')).toBe('../../common/logger.ts');
    // and a neighbour that moved with it stays a neighbour
    expect(token('net/h2/h2-connection.ts', './h2-frames.ts')).toBeUndefined();
  });
});
