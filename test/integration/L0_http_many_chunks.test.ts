// Triton's qa/L0_http/http_request_many_chunks.py: a body of a million
// one-byte chunks ("A") sent to each POST endpoint is answered, never
// crashing the server, with Triton's texts: the raw infer request's
// deduction error, and rapidjson's parse error for every JSON endpoint.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

const PARSE_ERROR = 'failed to parse the request JSON buffer: Invalid value. at 0';
let repo: string;
let engine: RunningEngine;

beforeAll(async () => {
  repo = tempRepo('l0-http-chunks', ['simple']);
  engine = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', loadModels: ['simple'] });
});
afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

/** The QA test's request: its request line and extra headers, then `count` chunks of "1\r\nA\r\n", then the last chunk. */
function chunked(requestLine: string, count: number, extra = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(engine.httpPort, '127.0.0.1', () => {
      s.write(
        `${requestLine}\r\n${extra}Host: localhost\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
      );
      const batch = Buffer.from('1\r\nA\r\n'.repeat(10_000));
      for (let i = 0; i < count / 10_000; i++) s.write(batch);
      s.end('0\r\n\r\n');
    });
    let reply = '';
    s.on('data', (d) => (reply += d));
    s.on('end', () => resolve(reply));
    s.on('error', reject);
  });
}

describe('L0_http_many_chunks', () => {
  it('infer (raw binary): the deduction error for a two-input model', async () => {
    const r = await chunked('POST /v2/models/simple/infer HTTP/1.1', 1_000_000, 'Inference-Header-Content-Length: 0\r\n');
    expect(r).toContain("Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' model configuration");
  });

  for (const path of [
    '/v2/repository/index',
    '/v2/repository/models/simple/load',
    '/v2/repository/models/simple/unload',
    '/v2/models/simple/trace/setting',
    '/v2/logging',
    '/v2/systemsharedmemory/region/test_system_shm_register/register',
    '/v2/cudasharedmemory/region/test_cuda_shm_register/register',
    '/v2/models/simple/generate',
  ]) {
    it(`${path}: rapidjson's parse error`, async () => {
      const r = await chunked(`POST ${path} HTTP/1.1`, 100_000);
      expect(r).toContain(PARSE_ERROR);
    });
  }

  it('the engine still serves after all of them', async () => {
    const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/health/ready`);
    expect(r.status).toBe(200);
  });
});
