// The local-channel suites' shared setup: an engine with its local socket in
// a private folder (HTTP and metrics off), and REQUEST frames built the way
// the gateway's channel sends them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningEngine } from '../../engine/server/server.ts';
import { inferenceService } from '../../protocol/index.ts';
import { requestHead } from '../../net/local/local-channel.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

const INFER = inferenceService().ModelInfer!;

export interface LocalChannelEngine {
  engine: RunningEngine;
  /** The private folder holding the socket (room for a test's own sockets). */
  dir: string;
  sock: string;
  stop(): Promise<void>;
}

/** An engine on a copy of the bundled `simple` model (plus what `addModels` writes) with its local socket. */
export async function startLocalChannelEngine(prefix: string, addModels?: (repo: string) => void): Promise<LocalChannelEngine> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  const repo = tempRepo(prefix, ['simple']);
  addModels?.(repo);
  const sock = path.join(dir, 'engine.sock');
  const engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1, localSocket: sock });
  return {
    engine,
    dir,
    sock,
    stop: async () => {
      await engine.stop();
      removeDir(repo);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A whole REQUEST frame carrying `msg` (a ModelInferRequest object). */
export function requestFrame(id: number, msg: object, timeoutMs = 0): Buffer {
  const m = INFER.requestSerialize(msg);
  return Buffer.concat([requestHead(id, timeoutMs, undefined, m.length), m]);
}
