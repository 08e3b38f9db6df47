// The engine's gRPC listener advertises large HTTP/2 frames and windows
// (net/h2/http2-settings.ts, applied in engine/frontends/grpc/grpc-js-internals.ts), so a client can send a big tensor
// inline without a WINDOW_UPDATE stall every 64 KiB. Checked from a raw
// node:http2 session: the SETTINGS the server sent and the connection window
// it opened. (That large inline tensors still arrive intact over these
// windows is L0_inline_receive's job.)
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONNECTION_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW } from '../../net/h2/http2-settings.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

let repo: string;
let engine: RunningEngine | undefined;

beforeAll(async () => {
  repo = tempRepo('l0-h2win', ['simple']);
  engine = await startTestEngine({ modelRepository: repo });
}, 60_000);

afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

describe('L0_grpc_http2_window: HTTP/2 frame size and windows of the gRPC listener', () => {
  it('advertises 1 MiB frames, 16 MiB stream windows and a 32 MiB connection window', async () => {
    const session = http2.connect(`http://127.0.0.1:${engine!.grpcPort}`);
    try {
      const settings = await new Promise<http2.Settings>((resolve, reject) => {
        session.once('remoteSettings', resolve);
        session.once('error', reject);
      });
      expect(settings.maxFrameSize).toBe(MAX_FRAME_SIZE);
      expect(settings.initialWindowSize).toBe(STREAM_WINDOW);
      // The connection window arrives as a WINDOW_UPDATE right after SETTINGS.
      const deadline = Date.now() + 5000;
      while ((session.state.remoteWindowSize ?? 0) < CONNECTION_WINDOW && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      expect(session.state.remoteWindowSize).toBe(CONNECTION_WINDOW);
    } finally {
      session.close();
    }
  });
});
