// A gRPC client that goes away mid-request aborts the engine request's
// signal (the frontend's RequestCancel, engine/api/cancel-signal.ts), so a queued
// request is dropped; one answered normally is never marked aborted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGrpcServer } from '../../engine/frontends/grpc/grpc-server.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import type { ServerApi } from '../../engine/api/server-api.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { cancelled } from '../../engine/api/status.ts';
import { SIMPLE_INFER_REQUEST, protoLoaderClient, removeDir, startTestEngine, tempRepo } from './helpers.ts';

let repo: string;
let engine: RunningEngine | undefined;

beforeAll(async () => {
  repo = tempRepo('l0-grpc-cancel', ['simple']);
  engine = await startTestEngine({ modelRepository: repo });
}, 60_000);

afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

const simpleReq = SIMPLE_INFER_REQUEST;

describe('L0_grpc_cancel: client cancellation reaches the engine request', () => {
  it('aborts the request signal when the client cancels, not when it is answered', async () => {
    let seen: ((r: InferRequest) => void) | undefined;
    let arrived = new Promise<InferRequest>((r) => (seen = r));
    let hold = true;
    // The engine's API with infer held open (when `hold`) until the request's signal fires.
    const api: ServerApi = Object.create(engine!.server, {
      infer: {
        value: (req: InferRequest) => {
          seen!(req);
          if (!hold) return engine!.server.infer(req);
          return new Promise((_res, rej) => req.signal!.addEventListener('abort', () => rej(cancelled('client went away'))));
        },
      },
    });
    const srv = await startGrpcServer(api, { port: 0, host: '127.0.0.1' });
    const client = protoLoaderClient(srv.port);
    try {
      const call = client.raw.ModelInfer(simpleReq, () => undefined);
      const req = await arrived;
      expect(req.signal!.aborted).toBe(false);
      call.cancel();
      await new Promise<void>((r) => (req.signal!.aborted ? r() : req.signal!.addEventListener('abort', () => r())));
      expect(req.signal!.aborted).toBe(true);

      hold = false;
      arrived = new Promise<InferRequest>((r) => (seen = r));
      const res = await client.call('ModelInfer', simpleReq);
      expect((res.raw_output_contents as Buffer[]).length).toBe(2);
      const answered = await arrived;
      await new Promise((r) => setTimeout(r, 50)); // the stream's close after the reply
      expect(answered.signal!.aborted).toBe(false);
    } finally {
      client.close();
      await srv.close();
    }
  });
});
