// A streaming client that stops reading (a socket that is never read, a gRPC
// stream paused after its first response) while a decoupled model floods it with 64 KiB
// responses: what the engine holds for it stays within
// --stream-max-queued-bytes, the request is cancelled down to the model
// (which stops and says so in a marker file), the reason is logged, and the
// client that reads again finds a final error saying why.
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { streamQueueStats } from '../../engine/frontends/stream-queue-bound.ts';
import { log } from '../../common/logger.ts';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { writeModel } from '../fixtures/test-models.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

const LIMIT = 1024 * 1024;
const CHUNK = 64 * 1024;
const N = 4000; // 256 MiB if nothing stopped it

const FLOOD_CONFIG = `name: "flood"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "N", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "CHUNK", data_type: TYPE_UINT8, dims: [ -1 ] } ]
`;
// Sends N responses of 64 KiB as fast as the event loop lets it; writes "<cancelled|done> <sent>" to the 'mark' path.
const FLOOD_MODEL = `import { writeFileSync } from 'node:fs';
type T = { data: Uint8Array };
type R = { inputs: Record<string, T>; parameters: Record<string, unknown>; signal: { aborted: boolean }; send: (r: unknown) => void };
export async function execute(requests: R[]) {
  await Promise.all(requests.map(async (r) => {
    const n = new Int32Array(Uint8Array.from(r.inputs.N.data).buffer)[0];
    const chunk = new Uint8Array(${CHUNK}).fill(7);
    let i = 0;
    for (; i < n && !r.signal.aborted; i++) {
      r.send({ outputs: { CHUNK: { datatype: 'UINT8', shape: [chunk.length], data: chunk } } });
      await new Promise((res) => setTimeout(res, 0));
    }
    writeFileSync(String(r.parameters.mark), (r.signal.aborted ? 'cancelled ' : 'done ') + i);
  }));
}
`;

let repo: string;
let dir: string;
let engine: RunningEngine;

beforeAll(async () => {
  repo = tempRepo('l0-stream-bp');
  writeModel(repo, 'flood', FLOOD_CONFIG, { 'model.ts': FLOOD_MODEL });
  dir = mkdtempSync(path.join(os.tmpdir(), 'l0-stream-bp-'));
  engine = await startTestEngine({ modelRepository: repo, streamMaxQueuedBytes: LIMIT, metricsPort: -1 });
}, 60_000);

afterEach(() => vi.restoreAllMocks());

afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
  removeDir(dir);
});

async function waitForFile(p: string, ms = 30_000): Promise<string> {
  const until = Date.now() + ms;
  while (!existsSync(p)) {
    if (Date.now() > until) throw new Error(`the model never wrote ${p}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 20));
  return readFileSync(p, 'utf8');
}

describe('L0_stream_backpressure', () => {
  it('generate_stream: a socket that stops reading holds at most the bound; the model is cancelled; a final error event', async () => {
    const warn = vi.spyOn(log, 'warn');
    streamQueueStats.peakQueuedBytes = streamQueueStats.queuedBytes;
    const overflowsBefore = streamQueueStats.overflows;
    const mark = path.join(dir, 'http-mark');
    const body = JSON.stringify({ N, mark });
    const sock = net.connect(engine.httpPort, '127.0.0.1');
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.pause(); // never read: the kernel buffers fill, then the engine's
    sock.write(
      `POST /v2/models/flood/generate_stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );

    const [state, sent] = (await waitForFile(mark)).split(' ');
    expect(state).toBe('cancelled');
    expect(Number(sent)).toBeLessThan(N / 4);
    // What waited in the engine never passed the bound (one event is ~128 KiB of JSON).
    expect(streamQueueStats.peakQueuedBytes).toBeLessThanOrEqual(LIMIT);
    expect(streamQueueStats.overflows).toBe(overflowsBefore + 1);
    expect(warn.mock.calls.map((c) => String(c[0])).join('\n')).toMatch(
      /generate_stream for model 'flood': cancelling: the client did not read the stream's responses: \d+ bytes waited, past the limit of 1048576/,
    );

    // Reading again: what waited, then the final error event, then the end.
    const chunks: Buffer[] = [];
    sock.on('data', (b: Buffer) => chunks.push(b));
    sock.resume();
    const text = await new Promise<string>((resolve) => {
      const check = () => {
        const t = Buffer.concat(chunks).toString();
        if (t.endsWith('0\r\n\r\n')) resolve(t);
        else setTimeout(check, 20);
      };
      check();
    });
    sock.destroy();
    const events = text.split('\n\n').filter((e) => e.includes('data: '));
    expect(events.at(-1)).toContain('"error":"the client did not read the stream\'s responses');
    expect(streamQueueStats.queuedBytes).toBe(0);
  }, 60_000);

  it('ModelStreamInfer: a stream that stops being read holds at most the bound; the model is cancelled; an error message', async () => {
    const warn = vi.spyOn(log, 'warn');
    streamQueueStats.peakQueuedBytes = streamQueueStats.queuedBytes;
    const mark = path.join(dir, 'grpc-mark');
    const client = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
    try {
      const call = client.modelStreamInfer();
      call.write({
        model_name: 'flood',
        parameters: { mark: { string_param: mark } },
        inputs: [{ name: 'N', datatype: 'INT32', shape: [1] }],
        raw_input_contents: [new Uint8Array(Int32Array.from([N]).buffer)],
      });
      // Read the first response, then pause: grpc-js then buffers up to its highWaterMark (16 messages), pauses
      // the HTTP/2 stream, and flow control does the rest. (A call that is never read at all is not a stalled
      // reader to HTTP/2: grpc-js never starts reading it, keeps its HTTP/2 stream flowing and queues every
      // message in the client's own memory, so the engine sees each one taken. Whether that happened depended on
      // timing, and this test failed on some hosts.)
      await new Promise<void>((resolve) => {
        call.once('data', () => {
          call.pause();
          resolve();
        });
      });
      const [state, sent] = (await waitForFile(mark)).split(' ');
      expect(state).toBe('cancelled');
      expect(Number(sent)).toBeLessThan(N / 4);
      expect(streamQueueStats.peakQueuedBytes).toBeLessThanOrEqual(LIMIT);
      expect(warn.mock.calls.map((c) => String(c[0])).join('\n')).toMatch(/ModelStreamInfer from .*: cancelling: the client did not read/);
      // Reading again: the responses that waited, then one error message, then the end of the stream.
      const got: Array<{ error_message?: string }> = [];
      call.on('data', (m: { error_message?: string }) => got.push(m));
      call.resume();
      await new Promise<void>((resolve, reject) => {
        call.on('end', () => resolve());
        call.on('error', reject);
      });
      expect(got.filter((m) => m.error_message).map((m) => m.error_message)).toEqual([
        expect.stringMatching(/^the client did not read the stream's responses: \d+ bytes waited, past the limit of 1048576/),
      ]);
      expect(got.at(-1)!.error_message).toMatch(/the client did not read/);
    } finally {
      client.close();
    }
    expect(streamQueueStats.queuedBytes).toBe(0);
  }, 60_000);
});
