// Property-based fuzzing (fast-check) of every parser that reads client or
// operator input: config.pbtxt (tokenizer + parser), the tensor codec, the
// HTTP binary-extension body, JSON tensor input, the gateway's body decoders,
// the shm request parameters, the settings APIs (trace and logging
// updates, restricted-API flags and headers), and the gateway's job reads
// (GET /jobs/<id> with random ids and keys), and the check of a model's (or a
// cached) response against its config. Random and mutated inputs must give a
// result or the module's own clear error, never another kind of throw, a
// hang or a crash. A few seconds in `npm test`; `npm run fuzz` (FUZZ_RUNS,
// default 20000 there) runs them longer.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '../../engine/config/model-config-parser.ts';
import { parseInferRequest } from '../../engine/frontends/http/infer-json.ts';
import { jsonToTensorBytes } from '../../engine/frontends/http/tensor-json.ts';
import { parseShmParams } from '../../engine/api/request-parameters.ts';
import { checkOutputs } from '../../engine/api/output-check.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import { StatusError } from '../../engine/api/status.ts';
import { GatewayError } from '../../gateway/core/errors.ts';
import { Hono } from 'hono';
import type { GatewayEnv } from '../../gateway/core/gateway-env.ts';
import { FunctionDefinitionSchema } from '../../gateway/calls/function-schema.ts';
import { jobKeyHash } from '../../gateway/jobs/job-access.ts';
import { mountJobRoutes } from '../../gateway/jobs/async-routes.ts';
import { MemoryJobQueue } from '../../gateway/jobs/memory-job-queue.ts';
import { implicitDefinition, type ResolvedFunction } from '../../gateway/calls/function-registry.ts';
import { bytesInput, jsonBodyInputs, multipartBodyInputs } from '../../gateway/calls/payload-codec.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TraceManager } from '../../engine/tracing/trace-manager.ts';
import { traceUpdateFromJson } from '../../engine/frontends/http/routes-settings.ts';
import { LogSettings } from '../../engine/server/log-settings.ts';
import { currentLogFile, setLogFile, setLogLevels, setLogVerbose } from '../../common/logger.ts';
import { checkSequenceId } from '../../engine/api/request-parameters.ts';
import { createHttpApp } from '../../engine/frontends/http/http-server.ts';
import { httpApiGroup, parseRestrictedFeatures, RESTRICTED_GROUPS } from '../../engine/frontends/restricted-api.ts';
import type { ServerApi } from '../../engine/api/server-api.ts';
import { getPath } from 'hono/utils/url';
import {
  DATATYPES,
  decodeValues,
  deserializeBytes,
  encodeValues,
  serializeBytes,
  TensorValueError,
  type Datatype,
} from '../../protocol/tensor-codec.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
const opts = (scale = 1) => ({
  numRuns: Math.max(10, Math.round(RUNS * scale)),
  seed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined,
});

/** Run `f`; any throw must satisfy `ok`, else the property fails with it. */
function only(ok: (e: unknown) => boolean, f: () => unknown): void {
  try {
    f();
  } catch (e) {
    if (!ok(e)) throw e;
  }
}
async function onlyAsync(ok: (e: unknown) => boolean, f: () => Promise<unknown>): Promise<void> {
  try {
    await f();
  } catch (e) {
    if (!ok(e)) throw e;
  }
}
const isStatus = (e: unknown) => e instanceof StatusError && e.code === 'INVALID_ARG';
const isGateway400 = (e: unknown) => e instanceof GatewayError && e.status === 400;

/** Replace, insert or delete a few characters of `s`. */
const mutated = (seed: string) =>
  fc
    .array(fc.tuple(fc.nat(), fc.constantFrom('replace', 'insert', 'delete'), fc.string({ minLength: 1, maxLength: 3 })), { maxLength: 6 })
    .map((edits) => {
      let s = seed;
      for (const [at, op, text] of edits) {
        const i = s.length ? at % s.length : 0;
        if (op === 'delete') s = s.slice(0, i) + s.slice(i + text.length);
        else if (op === 'insert') s = s.slice(0, i) + text + s.slice(i);
        else s = s.slice(0, i) + text + s.slice(i + text.length);
      }
      return s;
    });

const PBTXT = `name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x", data_type: TYPE_FP32, dims: [ -1, 4 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ 4 ] } ]
instance_group [ { count: 2, kind: KIND_CPU } ]
dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 }
parameters { key: "k" value: { string_value: "v\\"q" } }
`;

describe('fuzz: config.pbtxt', () => {
  it('random text: a config or INVALID_ARG naming the file', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        only(
          (e) => isStatus(e) && (e as Error).message.includes('m/config.pbtxt'),
          () => parseModelConfigText(text, 'm/config.pbtxt'),
        );
      }),
      opts(),
    );
  });

  it('mutated valid configs: a config or INVALID_ARG', () => {
    fc.assert(
      fc.property(mutated(PBTXT), (text) => {
        only(isStatus, () => parseModelConfigText(text, 'm/config.pbtxt'));
      }),
      opts(),
    );
  });

  it('pbtxt-like token soup: a config or INVALID_ARG', () => {
    const tok = fc.constantFrom(
      '{',
      '}',
      '[',
      ']',
      ':',
      ',',
      ';',
      '<',
      '>',
      'name',
      'input',
      'dims',
      '-1',
      '1e9',
      '0x1f',
      '"s"',
      "'t'",
      '#c\n',
      'TYPE_FP32',
      'step',
      'key',
      'value',
      'parameters',
      '\n',
      ' ',
    );
    fc.assert(
      fc.property(fc.array(tok, { maxLength: 60 }), (toks) => {
        only(isStatus, () => parseModelConfigText(toks.join(' '), 'm/config.pbtxt'));
      }),
      opts(),
    );
  });
});

const DT = fc.constantFrom(...DATATYPES);
const anyJson = fc.jsonValue({ maxDepth: 4 });

describe('fuzz: tensor codec', () => {
  it('encodeValues: bytes of the right size, or a TensorValueError', () => {
    fc.assert(
      fc.property(
        DT,
        fc.array(fc.oneof(fc.double(), fc.integer(), fc.boolean(), fc.string(), fc.constant(null), fc.bigInt()), { maxLength: 20 }),
        (dt, values) => {
          only(
            (e) => e instanceof TensorValueError,
            () => {
              const b = encodeValues(dt, values);
              if (dt !== 'BYTES') expect(b.byteLength % Math.max(1, values.length ? b.byteLength / values.length : 1)).toBe(0);
            },
          );
        },
      ),
      opts(),
    );
  });

  it('decodeValues of random bytes: values, or a clear Error', () => {
    fc.assert(
      fc.property(DT, fc.uint8Array({ maxLength: 64 }), (dt, bytes) => {
        only(
          (e) => e instanceof Error && /BYTES|element|multiple|size|length/i.test((e as Error).message),
          () => decodeValues(dt, bytes),
        );
      }),
      opts(),
    );
  });

  it('integer round trip: decode(encode(v)) === v', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Datatype>('INT8', 'INT16', 'INT32', 'UINT8', 'UINT16', 'UINT32'),
        fc.array(fc.integer({ min: 0, max: 127 }), { maxLength: 20 }),
        (dt, values) => {
          expect(decodeValues(dt, encodeValues(dt, values))).toEqual(values);
        },
      ),
      opts(),
    );
  });

  it('BYTES: deserialize(serialize(x)) === x; random buffers parse or throw a clear Error', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 10 }), { maxLength: 10 }), (items) => {
        expect(deserializeBytes(serializeBytes(items)).map((u) => [...u])).toEqual(items.map((u) => [...u]));
      }),
      opts(),
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (buf) => {
        only(
          (e) => e instanceof Error && /BYTES/.test((e as Error).message),
          () => deserializeBytes(buf),
        );
      }),
      opts(),
    );
  });
});

/** A valid binary-extension body with one FP32 input, as a seed for mutation. */
function binaryBody(n: number): { body: Buffer; header: number } {
  const json = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'x', datatype: 'FP32', shape: [n], parameters: { binary_data_size: n * 4 } }],
      outputs: [{ name: 'y', parameters: { binary_data: true } }],
    }),
  );
  return { body: Buffer.concat([json, Buffer.alloc(n * 4, 1)]), header: json.length };
}

describe('fuzz: HTTP binary extension and JSON tensor input', () => {
  it('random bodies and header lengths: a request or INVALID_ARG', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 200 }),
        fc.option(fc.oneof(fc.nat({ max: 300 }).map(String), fc.string({ maxLength: 6 }))),
        (body, header) => {
          only(isStatus, () => parseInferRequest(Buffer.from(body), header ?? undefined, 'm', undefined));
        },
      ),
      opts(),
    );
  });

  it('mutated valid bodies (bytes flipped, header length moved): a request or INVALID_ARG', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 16 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
        fc.integer({ min: -5, max: 5 }),
        (n, flips, shift) => {
          const { body, header } = binaryBody(n);
          for (const [at, v] of flips) body[at % body.length] = v;
          only(isStatus, () => parseInferRequest(body, String(Math.max(0, header + shift)), 'm', '1'));
        },
      ),
      opts(),
    );
  });

  it('JSON requests with random inputs: a request or INVALID_ARG', () => {
    const input = fc.record(
      {
        name: fc.oneof(fc.string(), anyJson),
        datatype: fc.oneof(DT, fc.string()),
        shape: fc.oneof(fc.array(fc.integer({ min: -2, max: 5 }), { maxLength: 4 }), anyJson),
        data: anyJson,
        parameters: fc.option(fc.dictionary(fc.string(), anyJson)),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.array(input, { maxLength: 3 }), fc.option(anyJson), (inputs, parameters) => {
        const body = Buffer.from(JSON.stringify({ inputs, ...(parameters === null ? {} : { parameters }) }));
        only(isStatus, () => parseInferRequest(body, undefined, 'm', undefined));
      }),
      opts(),
    );
  });

  it('jsonToTensorBytes with random data and shapes: bytes of shape x size, or INVALID_ARG', () => {
    fc.assert(
      fc.property(DT, fc.array(fc.nat({ max: 4 }), { maxLength: 3 }), anyJson, (dt, shape, data) => {
        only(isStatus, () => jsonToTensorBytes('x', dt, shape, data));
      }),
      opts(),
    );
  });
});

const fnOf = (inputs: ResolvedFunction['inputs']): ResolvedFunction => ({
  name: 'f',
  model: 'm',
  version: '',
  platform: 'p',
  implicit: true,
  definition: implicitDefinition('f'),
  inputs,
  outputs: [],
});
const SPECS = fc
  .array(
    fc.record({
      name: fc.constantFrom('a', 'b', 'img'),
      datatype: DT,
      shape: fc.array(fc.integer({ min: -1, max: 4 }), { minLength: 1, maxLength: 3 }),
    }),
    { minLength: 1, maxLength: 2 },
  )
  .map((specs) =>
    fnOf(specs.filter((s, i) => specs.findIndex((t) => t.name === s.name) === i).map((s) => ({ ...s, tensor: s.name.toUpperCase() }))),
  );

describe('fuzz: gateway body decoders', () => {
  it('JSON bodies (random and call-shaped): inputs or a 400 from the catalog', () => {
    const callShaped = fc
      .record({ inputs: fc.dictionary(fc.constantFrom('a', 'b', 'img', 'zz', '__proto__'), anyJson), outputs: fc.option(anyJson) })
      .map((o) => JSON.stringify(o));
    fc.assert(
      fc.property(SPECS, fc.oneof(fc.string({ maxLength: 80 }), callShaped), (fn, text) => {
        only(isGateway400, () => jsonBodyInputs(fn, Buffer.from(text)));
      }),
      opts(),
    );
  });

  it('raw bytes into a spec: a tensor or a 400', () => {
    fc.assert(
      fc.property(SPECS, fc.uint8Array({ maxLength: 64 }), (fn, bytes) => {
        only(isGateway400, () => bytesInput(fn, fn.inputs[0]!, bytes));
      }),
      opts(),
    );
  });

  it('multipart bodies (random and mutated): inputs or a 400', async () => {
    const boundary = 'BND';
    const seed = `--${boundary}\r\nContent-Disposition: form-data; name="a"\r\n\r\n[1,2]\r\n--${boundary}\r\nContent-Disposition: form-data; name="img"; filename="x"\r\nContent-Type: image/png\r\n\r\nPNGDATA\r\n--${boundary}--\r\n`;
    await fc.assert(
      fc.asyncProperty(SPECS, fc.oneof(fc.string({ maxLength: 100 }), mutated(seed)), async (fn, text) => {
        const form = () => new Response(text, { headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` } }).formData();
        await onlyAsync(isGateway400, () => multipartBodyInputs(fn, form));
      }),
      opts(0.5),
    );
  });
});

describe('fuzz: shm request parameters', () => {
  it('random parameter maps: a region reference with non-negative integers, undefined, or INVALID_ARG', () => {
    const val = fc.oneof(fc.string({ maxLength: 5 }), fc.double(), fc.integer(), fc.boolean(), fc.bigInt());
    const params = fc.record(
      { shared_memory_region: val, shared_memory_offset: val, shared_memory_byte_size: val, other: val },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.option(params), (p) => {
        only(isStatus, () => {
          const r = parseShmParams(p ?? undefined, 't', 'input');
          if (r) {
            expect(typeof r.region).toBe('string');
            expect(Number.isSafeInteger(r.offset) && r.offset >= 0).toBe(true);
            expect(Number.isSafeInteger(r.byteSize) && r.byteSize >= 0).toBe(true);
          }
        });
      }),
      opts(),
    );
  });
});

// ---- settings APIs (issue 21) ----

const isSettingsError = (e: unknown) => e instanceof StatusError && (e.code === 'INVALID_ARG' || e.code === 'UNSUPPORTED');
/** Names a client might try: relative, absolute, escapes, links, odd characters. */
const fileName = fc.oneof(
  fc.constantFrom(
    't.json',
    'a/t.json',
    '../t.json',
    '/etc/passwd',
    '/tmp/x.json',
    'link/t.json',
    'link.json',
    '',
    '.',
    './t.json',
    'a/../../t',
    'x\u0000y',
    '..',
    'sub/',
  ),
  fc.string({ maxLength: 12 }),
);
const settingValue = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.integer({ min: -3, max: 5000 }).map(String),
  fc.constantFrom('OFF', 'TIMESTAMPS', 'TENSORS', 'triton', 'opentelemetry', 'http://evil/x'),
);

describe('fuzz: trace settings updates', () => {
  it('random updates: settings or INVALID_ARG/UNSUPPORTED; a client never points traces outside --trace-dir or at another collector', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fuzz-trace-'));
    fs.mkdirSync(path.join(dir, 'a'));
    fs.symlinkSync(os.tmpdir(), path.join(dir, 'link'));
    fs.symlinkSync('/etc/passwd', path.join(dir, 'link.json'));
    const root = fs.realpathSync(dir);
    const start = path.join(os.tmpdir(), 'start-trace.json');
    try {
      const key = fc.constantFrom(
        'trace_file',
        'trace_level',
        'trace_rate',
        'trace_count',
        'log_frequency',
        'trace_mode',
        'opentelemetry_url',
        'bogus',
      );
      const update = fc.dictionary(
        key,
        fc.oneof(
          fc.array(settingValue, { maxLength: 3 }),
          fileName.map((f): string[] => [f]),
          fc.constant([start]).map((x): string[] => [...x]),
        ),
        { maxKeys: 4 },
      );
      fc.assert(
        fc.property(fc.boolean(), fc.option(fc.constantFrom('m', 'n')), update, (withDir, model, u) => {
          const tm = new TraceManager({ trace_file: [start] }, 'fuzz', withDir ? { traceDir: dir } : {});
          only(isSettingsError, () => tm.update(model ?? undefined, u));
          for (const scope of [undefined, 'm', 'n']) {
            const s = tm.settings(scope);
            const f = s.trace_file![0]!;
            const fine = f === '' || f === start || (withDir && f.startsWith(root + path.sep) && !f.split(path.sep).includes('..'));
            expect(fine, f).toBe(true);
            expect(s.opentelemetry_url).toEqual(['http://localhost:4318/v1/traces']);
          }
        }),
        opts(),
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('HTTP trace JSON of any shape: engine settings or INVALID_ARG', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }), (body) => {
        only(isStatus, () => traceUpdateFromJson(body as Record<string, unknown>));
      }),
      opts(),
    );
  });
});

describe('fuzz: log settings updates', () => {
  it('random updates: settings or INVALID_ARG/UNSUPPORTED, applied whole or not at all; log_file only under --log-dir', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fuzz-log-'));
    fs.mkdirSync(path.join(dir, 'a'));
    fs.symlinkSync(os.tmpdir(), path.join(dir, 'link'));
    const root = fs.realpathSync(dir);
    const value = fc.oneof(
      fc.boolean(),
      fc.integer({ min: -2, max: 3 }),
      fc.double({ noNaN: true }),
      fc.constantFrom('default', 'ISO8601', 'x'),
      fileName,
    );
    const key = fc.constantFrom('log_file', 'log_info', 'log_warning', 'log_error', 'log_verbose_level', 'log_format', 'bogus');
    try {
      fc.assert(
        fc.property(fc.boolean(), fc.dictionary(key, value, { maxKeys: 4 }), (withDir, u) => {
          const ls = new LogSettings(withDir ? { logDir: dir } : {});
          const before = ls.update();
          let after: Record<string, unknown> | undefined;
          only(isSettingsError, () => {
            after = ls.update(u);
          });
          const now = ls.update();
          if (!after) expect(now).toEqual(before);
          const f = currentLogFile();
          expect(f === '' || (withDir && f.startsWith(root + path.sep)), f).toBe(true);
          // Back to quiet defaults for the next run (the logger is process-wide).
          setLogFile(undefined);
          setLogVerbose(0);
          setLogLevels({ info: true, warn: true, error: true });
        }),
        opts(),
      );
    } finally {
      setLogFile(undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sequence_id of any type or size: accepted only as a string or an integer in [0, 2^64)', () => {
    const v = fc.oneof(
      fc.string({ maxLength: 4 }),
      fc.double(),
      fc.integer(),
      fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
      fc.boolean(),
      fc.constantFrom(2 ** 64, 2 ** 64 - 2048, -0, 2n ** 64n, 2n ** 64n - 1n),
    );
    fc.assert(
      fc.property(v, (x) => {
        let ok = true;
        only(isStatus, () => {
          try {
            checkSequenceId(x);
          } catch (e) {
            ok = false;
            throw e;
          }
        });
        const big = typeof x === 'bigint' ? x : typeof x === 'number' && Number.isInteger(x) ? BigInt(x) : undefined;
        expect(ok).toBe(typeof x === 'string' || (big !== undefined && big >= 0n && big < 2n ** 64n));
      }),
      opts(),
    );
  });
});

describe('fuzz: restricted APIs', () => {
  const isParseError = (e: unknown) =>
    e instanceof Error &&
    /option format is|unknown restricted (api|protocol)|can not be specified in multiple config groups|is not a valid header name/.test(
      e.message,
    );

  it('random flag values: restrictions or a parse error in Triton words', () => {
    const piece = fc.oneof(fc.constantFrom(...RESTRICTED_GROUPS, ',', ':', '=', 'key', 'v', 'bad group', ''), fc.string({ maxLength: 6 }));
    fc.assert(
      fc.property(
        fc.array(
          fc.array(piece, { maxLength: 6 }).map((a) => a.join('')),
          { maxLength: 3 },
        ),
        fc.boolean(),
        (args, grpc) => {
          only(isParseError, () => {
            const m = parseRestrictedFeatures(args, grpc ? 'grpc-restricted-protocol' : 'http-restricted-api');
            for (const [g, r] of m) {
              expect(RESTRICTED_GROUPS).toContain(g);
              expect(r.value.length).toBeGreaterThan(0);
              if (grpc) expect(r.header.startsWith('triton-grpc-protocol-')).toBe(true);
            }
          });
        },
      ),
      opts(),
    );
  });

  it("any path and header: 403 with Triton's text exactly when the path's group is restricted and the header is wrong", async () => {
    const features = parseRestrictedFeatures(
      ['model-repository,trace,logging,shared-memory:admin-key=s3cret', 'inference:infer-key=i'],
      'http-restricted-api',
    );
    // A server whose every call fails, noting which API calls the request reached.
    const called: string[] = [];
    const api = new Proxy(
      {},
      {
        get: (_t, k) =>
          k === 'name' || k === 'version'
            ? 'x'
            : k === 'extensions'
              ? []
              : () => {
                  called.push(String(k));
                  throw new StatusError('UNAVAILABLE', 'fuzz');
                },
      },
    ) as ServerApi;
    // The group of each engine call, independent of the path classifier.
    const callGroup = (m: string) =>
      /^(repositoryIndex|loadModel|unloadModel)$/.test(m)
        ? 'model-repository'
        : m === 'traceSettings'
          ? 'trace'
          : m === 'logSettings'
            ? 'logging'
            : /[sS]hm/.test(m)
              ? 'shared-memory'
              : m === 'infer'
                ? 'inference'
                : undefined;
    const app = createHttpApp(api, { restricted: features });
    const segment = fc.oneof(
      fc.constantFrom(
        'v2',
        'models',
        'm',
        'versions',
        '1',
        'infer',
        'ready',
        'config',
        'stats',
        'trace',
        'setting',
        'logging',
        'repository',
        'index',
        'load',
        'systemsharedmemory',
        'cudasharedmemory',
        'region',
        'status',
        'health',
        'live',
        '%72epository',
        '%6Cogging',
        '.',
        '..',
        '',
      ),
      fc.string({ maxLength: 4 }).map(encodeURIComponent),
    );
    const pathArb = fc.array(segment, { minLength: 1, maxLength: 6 }).map((s) => `/${s.join('/')}`);
    const header = fc.option(
      fc.record({ name: fc.constantFrom('admin-key', 'ADMIN-KEY', 'infer-key', 'x'), value: fc.constantFrom('s3cret', 'i', 'S3CRET', '') }),
    );
    await fc.assert(
      fc.asyncProperty(pathArb, fc.constantFrom('GET', 'POST', 'DELETE'), header, async (p, method, h) => {
        const headers: Record<string, string> = h && h.value ? { [h.name]: h.value } : {};
        let req: Request;
        try {
          req = new Request(`http://localhost${p}`, { method, headers, body: method === 'POST' ? '{}' : undefined });
        } catch {
          return; // not a request a client could send
        }
        const decoded = getPath(req); // the path Hono's router matches
        called.length = 0;
        const r = await app.request(req);
        // Whatever the spelling, no call of a restricted group ran without its header.
        for (const m of called) {
          const g = callGroup(m);
          const need = g && features.get(g);
          if (need) expect(headers[need.header], `${method} ${p} reached ${m}`).toBe(need.value);
        }
        const group = httpApiGroup(decoded);
        const need = group && features.get(group);
        const sent = need ? Object.entries(headers).find(([k]) => k.toLowerCase() === need.header)?.[1] : undefined;
        if (need && sent !== need.value) {
          expect(r.status, `${method} ${p}`).toBe(403);
          expect(await r.json()).toEqual({ error: `This API is restricted, expecting header '${need.header}'` });
        } else {
          expect(r.status, `${method} ${p}`).not.toBe(403);
        }
      }),
      opts(0.5),
    );
  });
});

describe('fuzz: job reads (GET /jobs/<id>)', () => {
  // A keyed job made with KEY and an open one, both finished with a result marker, behind the real routes.
  const KEY = 'k3y-Alice_01';
  const RESULT = 'RESULT-MARKER';
  const env = { FUZZ_JOB_KEYS: `${KEY},k3y-bob` };
  const defs = [
    FunctionDefinitionSchema.parse({ name: 'keyed', target: { model: 'm' }, auth: { apiKeyEnv: ['FUZZ_JOB_KEYS'] } }),
    FunctionDefinitionSchema.parse({ name: 'open', target: { model: 'm' } }),
  ];
  async function setup() {
    const queue = new MemoryJobQueue();
    const app = new Hono<GatewayEnv>();
    app.onError((e, c) => (e instanceof GatewayError ? c.json(e.toJSON(), e.status) : c.json({ crashed: String(e) }, 500)));
    app.notFound((c) => c.json({ error: { code: 'ROUTE_NOT_FOUND' } }, 404)); // '', '.', '..' leave /jobs/:id
    mountJobRoutes(app, { queue, env }, (n) => defs.find((d) => d.name === n));
    const made = async (fn: string, key?: string) => {
      const id = `job${fn}${'x'.repeat(20)}`.slice(0, 24);
      let rec = await queue.enqueue({ id, fn, retentionMs: 60_000, ...(key ? { keyHash: jobKeyHash(id, key) } : {}) });
      rec = (await queue.update(rec, 'running'))!;
      await queue.update(rec, 'succeeded', { status: 200, result: { outputs: { y: RESULT } } });
      return id;
    };
    return { app, keyed: await made('keyed', KEY), open: await made('open') };
  }
  const printable = fc.string({ unit: 'grapheme-ascii', maxLength: 24 });

  it('random ids: 404 from the catalog (or the job itself), never another status', async () => {
    const { app, keyed, open } = await setup();
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ maxLength: 80 }), mutated(keyed), mutated(open)), async (id) => {
        const r = await app.request(`/jobs/${encodeURIComponent(id)}`);
        const body = await r.text();
        if (id === open) return void expect(r.status).toBe(200);
        if (id === keyed) return void expect(r.status).toBe(401);
        expect(r.status).toBe(404);
        expect(['JOB_NOT_FOUND', 'ROUTE_NOT_FOUND']).toContain(JSON.parse(body).error.code);
      }),
      opts(0.5),
    );
  });

  it('random keys: the result only with the key the call was made with; 401/403 otherwise, never the result', async () => {
    const { app, keyed, open } = await setup();
    const key = fc.oneof(printable, mutated(KEY), fc.constantFrom(KEY, ` ${KEY} `, 'k3y-bob', KEY.toUpperCase(), `${KEY}x`, ''));
    await fc.assert(
      fc.asyncProperty(key, fc.constantFrom('x-api-key', 'bearer'), async (k, how) => {
        const headers: Record<string, string> = how === 'x-api-key' ? { 'X-API-Key': k } : { Authorization: `Bearer ${k}` };
        const r = await app.request(`/jobs/${keyed}`, { headers });
        const body = await r.text();
        const presented = k.trim();
        if (presented === KEY) {
          expect(r.status).toBe(200);
          expect(body).toContain(RESULT);
        } else {
          expect(r.status).toBe(presented ? 403 : 401);
          expect(JSON.parse(body).error.code).toBe(presented ? 'JOB_KEY_INVALID' : 'JOB_KEY_MISSING');
          expect(body).not.toContain(RESULT);
        }
        // A job of a function without a key reads the same whatever key comes with it.
        expect((await app.request(`/jobs/${open}`, { headers })).status).toBe(200);
      }),
      opts(),
    );
  });
});

describe('fuzz: response outputs against the config', () => {
  const config = (batch: number, dt: Datatype, dims: number[]) =>
    ({
      name: 'm',
      max_batch_size: batch,
      input: [],
      output: [{ name: 'y', data_type: dt === 'BYTES' ? 'TYPE_STRING' : `TYPE_${dt}`, dims }],
    }) as unknown as ModelConfig;
  const dim = fc.oneof(fc.integer({ min: 0, max: 4 }), fc.constant(-1), fc.integer({ min: -3, max: 1 << 20 }));
  const sizes: Record<string, number> = {
    BOOL: 1,
    UINT8: 1,
    UINT16: 2,
    UINT32: 4,
    UINT64: 8,
    INT8: 1,
    INT16: 2,
    INT32: 4,
    INT64: 8,
    FP16: 2,
    BF16: 2,
    FP32: 4,
    FP64: 8,
  };

  it('random shapes, datatypes and byte sizes: undefined exactly when they fit, else INVALID_ARG naming the output; never a throw', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...DATATYPES),
        fc.constantFrom(...DATATYPES),
        fc.array(
          fc.integer({ min: -1, max: 4 }).filter((d) => d !== 0),
          { maxLength: 3 },
        ),
        fc.array(dim, { maxLength: 4 }),
        fc.integer({ min: 0, max: 4 }),
        fc.option(fc.integer({ min: 0, max: 4 })),
        fc.nat({ max: 96 }),
        (want, got, dims, shape, maxBatch, batch, extra) => {
          const ok = shape.every((d) => Number.isSafeInteger(d) && d >= 0);
          const count = ok ? shape.reduce((a, d) => a * d, 1) : 0;
          // Mostly the right size (so the other checks are reached), sometimes not.
          const rightSize = got === 'BYTES' ? count * 4 : (sizes[got] ?? 0) * count;
          const byteLength = extra % 3 === 0 ? extra : rightSize;
          const data = count * 4 <= 1 << 16 && byteLength <= 1 << 16 ? new Uint8Array(byteLength) : new Uint8Array(extra);
          const full = maxBatch > 0 ? [-1, ...dims] : dims;
          const fits =
            got === want &&
            ok &&
            shape.length === full.length &&
            full.every((d, i) => d === -1 || d === shape[i]) &&
            !(maxBatch > 0 && batch !== null && shape[0] !== batch) &&
            (got === 'BYTES' ? data.byteLength === count * 4 : data.byteLength === (sizes[got] ?? 0) * count);
          const r = checkOutputs(config(maxBatch, want, dims), [{ name: 'y', datatype: got, shape, data }], ['y'], batch ?? undefined);
          if (fits) expect(r).toBeUndefined();
          else {
            expect(r, JSON.stringify({ want, got, dims, shape, maxBatch, batch, byteLength: data.byteLength })).toBeInstanceOf(StatusError);
            expect(r!.code).toBe('INVALID_ARG');
            expect(r!.message).toContain("'y'");
            expect(r!.message).toContain("model 'm'");
          }
        },
      ),
      opts(),
    );
  });

  it('random names, duplicates, junk shapes and BYTES buffers: a verdict, never a throw', () => {
    const out = fc.record({
      name: fc.constantFrom('y', 'z', ''),
      datatype: fc.oneof(fc.constantFrom(...DATATYPES), fc.string({ maxLength: 4 })),
      shape: fc.oneof(fc.array(fc.oneof(fc.integer({ min: -2, max: 3 }), fc.double()), { maxLength: 3 }), fc.anything()),
      data: fc.uint8Array({ maxLength: 64 }),
    });
    fc.assert(
      fc.property(fc.array(out, { maxLength: 3 }), fc.array(fc.constantFrom('y', 'z'), { maxLength: 2 }), (outputs, wanted) => {
        const r = checkOutputs(config(0, 'BYTES', [-1]), outputs as never, wanted, undefined);
        if (r) expect(r.code).toBe('INVALID_ARG');
      }),
      opts(),
    );
  });
});
