// /openapi.json: an OpenAPI 3.1 document generated from the zod schemas of
// function-schema.ts (z.toJSONSchema), one path per function with its own
// input names, datatypes and shapes from the engine's metadata.
import { z } from 'zod';
import { ERROR_CATALOG } from '../core/errors.ts';
import type { ResolvedFunction } from '../calls/function-registry.ts';
import { rowsReplySchemaFor } from '../calls/reply-rows.ts';
import {
  CallReplySchema,
  ErrorReplySchema,
  FunctionBundleSchema,
  InputValueSchema,
  TensorDescriptionSchema,
} from '../calls/function-schema.ts';

function json(schema: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(schema, { target: 'draft-2020-12', unrepresentable: 'any' }) as Record<string, unknown>;
}

/** The call body of one function as a zod schema (its inputs by name). */
export function callBodySchemaFor(fn: ResolvedFunction): z.ZodType {
  const inputs = Object.fromEntries(
    fn.inputs.map((s) => [s.name, InputValueSchema.describe(`${s.datatype} [${s.shape.join(', ')}] (tensor ${s.tensor})`)]),
  );
  return z
    .object({
      inputs: z.object(inputs).strict(),
      outputs: z.array(z.enum(fn.outputs.map((o) => o.name) as [string, ...string[]])).optional(),
    })
    .strict();
}

const errorResponses = () => {
  const byStatus = new Map<number, string[]>();
  for (const [code, e] of Object.entries(ERROR_CATALOG)) byStatus.set(e.status, [...(byStatus.get(e.status) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => [
      String(status),
      { description: codes.join(', '), content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
    ]),
  );
};

const replySchema = (fn: ResolvedFunction) =>
  fn.definition.rows ? json(rowsReplySchemaFor(fn, fn.definition.rows)) : { $ref: '#/components/schemas/CallReply' };

/** The 200 reply of a streaming function (its target is decoupled; gateway/http/stream-routes.ts). */
function streamReply(fn: ResolvedFunction): Record<string, unknown> {
  const one = replySchema(fn);
  return {
    description:
      'a streaming function: one reply per model response. text/event-stream: a `data:` event per response, an `error` event ' +
      '({"error": {code, message}}) for a failed response, then an `end` event {"responses": n}. application/x-ndjson: one JSON ' +
      'line per response (or error). Otherwise all responses as one JSON array, up to the limits.maxBodyBytes of the function.',
    content: {
      'text/event-stream': { schema: { type: 'string' }, itemSchema: one },
      'application/x-ndjson': { schema: { type: 'string' }, itemSchema: one },
      'application/json': { schema: { type: 'array', items: one } },
    },
  };
}

/** The whole document for the functions that resolve now (`streaming`: names of the streaming ones). */
export function openApiDocument(
  functions: ResolvedFunction[],
  version: string,
  streaming: ReadonlySet<string> = new Set(),
): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  for (const fn of functions) {
    const raw = fn.inputs.length === 1 && (fn.inputs[0]!.datatype === 'UINT8' || fn.inputs[0]!.datatype === 'BYTES');
    const content: Record<string, unknown> = {
      'application/json': { schema: json(callBodySchemaFor(fn)) },
      'multipart/form-data': {
        schema: {
          type: 'object',
          required: fn.inputs.map((s) => s.name),
          properties: Object.fromEntries(
            fn.inputs.map((s) => [s.name, { type: 'string', description: `${s.datatype} [${s.shape.join(', ')}]` }]),
          ),
        },
      },
    };
    if (raw) {
      for (const t of ['application/octet-stream', 'image/jpeg', 'image/png'])
        content[t] = { schema: { type: 'string', format: 'binary' } };
    }
    paths[`/fn/${fn.name}`] = {
      post: {
        operationId: `call_${fn.name.replace(/[^A-Za-z0-9_]/g, '_')}`,
        summary: fn.definition.description ?? `${fn.implicit ? 'ensemble' : 'function'} ${fn.name} -> ${fn.model}`,
        ...(fn.definition.auth ? { security: [{ apiKey: [] }, { bearer: [] }] } : {}),
        requestBody: { required: true, content },
        responses: {
          '200': streaming.has(fn.name)
            ? streamReply(fn)
            : {
                description: 'outputs (JSON), or one output as raw bytes with Accept: application/octet-stream',
                headers: { 'X-Payload-Transfer': { schema: { type: 'string', enum: ['inline', 'shm'] } } },
                content: {
                  'application/json': { schema: replySchema(fn) },
                  'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
                },
              },
          ...errorResponses(),
        },
      },
    };
  }
  paths['/fn'] = { get: { summary: 'list functions with their inputs and outputs', responses: { '200': { description: 'functions' } } } };
  for (const p of ['/healthz', '/readyz', '/metrics'])
    paths[p] = { get: { responses: { '200': { description: 'ok' }, '503': { description: 'not ready' } } } };
  paths['/jobs/{id}'] = {
    get: {
      summary: 'state of an async call: queued | running | succeeded | failed | dead, with its result or error',
      description: 'For a function with an API key: send the key the call was made with (JOB_KEY_MISSING / JOB_KEY_INVALID otherwise).',
      security: [{}, { apiKey: [] }, { bearer: [] }],
      responses: { '200': { description: 'job' }, ...errorResponses() },
    },
  };
  const admin = { security: [{ bearer: [] }] };
  paths['/admin/functions'] = {
    get: {
      ...admin,
      summary: 'the active bundle, in the form PUT accepts',
      responses: {
        '200': { description: 'bundle', content: { 'application/json': { schema: { $ref: '#/components/schemas/FunctionBundle' } } } },
      },
    },
    put: {
      ...admin,
      summary: 'validate a whole bundle, then swap it in atomically (a refused bundle lists every error and changes nothing)',
      requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/FunctionBundle' } } } },
      responses: { '200': { description: 'deployed' }, ...errorResponses() },
    },
  };
  paths['/admin/functions/rollback'] = {
    post: {
      ...admin,
      summary: 'restore the previous bundle version',
      responses: { '200': { description: 'rolled back' }, ...errorResponses() },
    },
  };
  return {
    openapi: '3.1.0',
    info: { title: 'function gateway', version },
    paths,
    components: {
      schemas: {
        CallReply: json(CallReplySchema),
        Error: json(ErrorReplySchema),
        Tensor: json(TensorDescriptionSchema),
        FunctionBundle: json(FunctionBundleSchema),
      },
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        bearer: { type: 'http', scheme: 'bearer' },
      },
    },
  };
}
