// KServe v2 JSON on the real engine, as Triton's HTTP frontend reads and
// writes it: INT64/UINT64 `data` exact both ways (2^62+1, 2^64-1 and -2^63
// come back as sent), and a BYTES output that is not UTF-8 refused as JSON
// (it is returned with binary_data). js models echo their input.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { JS_ECHO_MODEL } from '../fixtures/test-models.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

let repo: string;
let engine: RunningEngine;

function echoModel(name: string, type: string): void {
  mkdirSync(path.join(repo, name, '1'), { recursive: true });
  writeFileSync(
    path.join(repo, name, 'config.pbtxt'),
    `name: "${name}"\nbackend: "js"\ndefault_model_filename: "model.ts"\nmax_batch_size: 0\n` +
      `input [ { name: "INPUT0", data_type: TYPE_${type}, dims: [ -1 ] } ]\noutput [ { name: "OUTPUT0", data_type: TYPE_${type}, dims: [ -1 ] } ]\n`,
  );
  writeFileSync(path.join(repo, name, '1', 'model.ts'), JS_ECHO_MODEL);
}

/** POST a JSON text as is; the answer's text as is (so big integers can be read exactly). */
async function infer(model: string, text: string): Promise<{ status: number; text: string }> {
  const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: text,
  });
  return { status: r.status, text: await r.text() };
}
const dataOf = (text: string) => /"data":\[([^\]]*)\]/.exec(text)?.[1];

beforeAll(async () => {
  repo = tempRepo('l0-http-json-exact');
  echoModel('echo_int64', 'INT64');
  echoModel('echo_uint64', 'UINT64');
  echoModel('echo_bytes', 'STRING');
  engine = await startTestEngine({ modelRepository: repo });
});

afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

describe('L0_http_json_exact: INT64 / UINT64 in JSON', () => {
  it('2^62+1, -2^63 and 2^63-1 survive an INT64 round trip', async () => {
    const values = [2n ** 62n + 1n, -(2n ** 63n), 2n ** 63n - 1n, 9007199254740993n, -1n, 0n];
    const r = await infer(
      'echo_int64',
      `{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[${values.length}],"data":[${values.join(',')}]}]}`,
    );
    expect(r.status).toBe(200);
    expect(dataOf(r.text)).toBe(values.join(','));
  });

  it('2^64-1 survives a UINT64 round trip; values past the type are refused naming the element', async () => {
    const values = [2n ** 64n - 1n, 2n ** 62n + 1n, 1n];
    const r = await infer('echo_uint64', `{"inputs":[{"name":"INPUT0","datatype":"UINT64","shape":[3],"data":[${values.join(',')}]}]}`);
    expect(r.status).toBe(200);
    expect(dataOf(r.text)).toBe(values.join(','));
    const over = await infer('echo_uint64', `{"inputs":[{"name":"INPUT0","datatype":"UINT64","shape":[1],"data":[18446744073709551616]}]}`);
    expect(over.status).toBe(400);
    expect(JSON.parse(over.text).error).toBe("element 0 of input 'INPUT0' is not a valid UINT64 value: 18446744073709551616");
    const neg = await infer('echo_int64', `{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1],"data":[-9223372036854775809]}]}`);
    expect(neg.status).toBe(400);
  });

  it('long digit runs in fractions and strings do not change numbers', async () => {
    const r = await infer(
      'echo_int64',
      `{"id":"12345678901234567890","parameters":{"note":0.12345678901234567891},"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[2],"data":[1,2]}]}`,
    );
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).id).toBe('12345678901234567890');
    expect(dataOf(r.text)).toBe('1,2');
  });
});

describe('L0_http_json_exact: BYTES that are not UTF-8', () => {
  // 0xff 0xfe is no UTF-8 sequence: the client sends it in binary, asks for JSON back.
  const raw = Buffer.from([0xff, 0xfe, 0x41]);
  const body = (binaryOut: boolean) => {
    const tensor = Buffer.alloc(4 + raw.length);
    tensor.writeUInt32LE(raw.length, 0);
    raw.copy(tensor, 4);
    const header = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: tensor.length } }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: binaryOut } }],
      }),
    );
    return { header, payload: Buffer.concat([header, tensor]) };
  };
  const post = async (binaryOut: boolean) => {
    const { header, payload } = body(binaryOut);
    const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/echo_bytes/infer`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(header.length) },
      body: payload,
    });
    return { status: r.status, headerLength: r.headers.get('inference-header-content-length'), body: Buffer.from(await r.arrayBuffer()) };
  };

  it('as JSON: refused, naming the output and the way to get it', async () => {
    const r = await post(false);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body.toString()).error).toBe(
      "element 0 of BYTES output 'OUTPUT0' is not valid UTF-8 and cannot be sent as JSON; request the output with 'binary_data': true",
    );
  });

  it('as binary: the same bytes come back', async () => {
    const r = await post(true);
    expect(r.status).toBe(200);
    const tail = r.body.subarray(Number(r.headerLength));
    expect(tail.readUInt32LE(0)).toBe(raw.length);
    expect(tail.subarray(4)).toEqual(raw);
  });
});
