// zod schemas of the gateway's own formats: one function definition
// (functions/<name>.json), a bundle of them (the deploy format of issue 6),
// the JSON call body and reply, and the error body. openapi.ts renders them
// with z.toJSONSchema, so these are the single source of both validation and
// documentation.
import { z } from 'zod';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Which model or ensemble a function calls. */
export const TargetSchema = z
  .object({
    model: z.string().regex(NAME).describe('model or ensemble name in the engine'),
    version: z
      .string()
      .regex(/^(\d+)?$/)
      .default('')
      .describe("model version; '' is the engine's choice"),
  })
  .strict();

export const AuthSchema = z
  .object({
    apiKeyEnv: z
      .array(z.string().regex(ENV_NAME))
      .min(1)
      .describe('environment variables holding accepted API keys (each may hold several, comma-separated)'),
  })
  .strict();

export const LimitsSchema = z
  .object({
    maxBodyBytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024 * 1024),
    timeoutMs: z.number().int().positive().default(30_000),
  })
  .strict();

/** An http(s) URL: `z.string().url()` alone lets `javascript:` or `file:` entries through. */
const HttpUrl = z
  .string()
  .url()
  .refine((s) => /^https?:$/i.test(new URL(s).protocol), { message: 'must be an http or https URL' });

/**
 * Asynchronous calls and callbacks (used by the async-jobs feature). A
 * function without `async` settings still takes async calls, with these
 * defaults (enabled; callbacks only to GATEWAY_CALLBACK_ALLOW); set
 * `enabled: false` to refuse them.
 */
export const AsyncSchema = z
  .object({
    enabled: z.boolean().default(true),
    callbackAllow: z.array(HttpUrl).default([]).describe('callback URL prefixes accepted for this function'),
    secretEnv: z.string().regex(ENV_NAME).optional().describe('variable holding the HMAC key for callbacks'),
    resultTtlMs: z.number().int().positive().default(3_600_000),
    maxDeliveryAttempts: z.number().int().min(1).max(50).default(6),
    backoffMs: z.number().int().min(0).default(1000).describe('base delay of the full-jitter exponential backoff between deliveries'),
    maxBackoffMs: z.number().int().min(0).default(60_000).describe('ceiling of one backoff delay'),
    attemptTimeoutMs: z.number().int().positive().default(10_000).describe('how long one delivery attempt may take'),
  })
  .strict();

/** Verification and mapping of inbound third-party webhooks that call this function. */
export const InboundWebhookSchema = z
  .object({
    secretEnv: z.string().regex(ENV_NAME),
    signatureHeader: z.string().default('X-Signature-256'),
    timestampHeader: z.string().default('X-Timestamp'),
    toleranceS: z.number().int().positive().default(300),
    inputs: z
      .record(z.string(), z.string().regex(/^\$(\.[A-Za-z0-9_-]+)+$/))
      .describe('function input name to a JSON path of the event, e.g. $.data.image'),
    respondAsync: z.boolean().default(false).describe('answer 202 with a job at once instead of the result'),
  })
  .strict();

/** A reply as rows: outputs that share their first dim zipped into one object per row (e.g. OCR lines). */
export const RowsReplySchema = z
  .object({
    key: z.string().regex(NAME).default('rows').describe('property of the reply holding the rows'),
    fields: z
      .record(z.string().regex(NAME), z.string().regex(NAME))
      .refine((f) => Object.keys(f).length > 0, 'needs at least one field')
      .describe("row field name to a function output; row i takes element i of the output's first dim"),
  })
  .strict();
export type RowsReply = z.infer<typeof RowsReplySchema>;

/** One function definition: functions/<name>.json. */
export const FunctionDefinitionSchema = z
  .object({
    name: z.string().regex(NAME),
    description: z.string().optional(),
    target: TargetSchema,
    inputs: z
      .record(z.string().regex(NAME), z.string().min(1))
      .optional()
      .describe("function input name to the target's input tensor; default: the tensors' own names"),
    outputs: z
      .record(z.string().regex(NAME), z.string().min(1))
      .optional()
      .describe("function output name to the target's output tensor; default: all outputs under their own names"),
    auth: AuthSchema.optional(),
    limits: LimitsSchema.default({ maxBodyBytes: 64 * 1024 * 1024, timeoutMs: 30_000 }),
    async: AsyncSchema.optional(),
    webhook: InboundWebhookSchema.optional(),
    rows: RowsReplySchema.optional().describe('reply {key: [{field: value}]} instead of {"outputs": ...}'),
  })
  .strict();
export type FunctionDefinition = z.infer<typeof FunctionDefinitionSchema>;
export type FunctionDefinitionInput = z.input<typeof FunctionDefinitionSchema>;

/** A versioned set of definitions (the deploy format); names are unique. */
export const FunctionBundleSchema = z
  .object({
    version: z.string().min(1).optional(),
    functions: z.array(FunctionDefinitionSchema),
  })
  .strict()
  .superRefine((b, ctx) => {
    const seen = new Set<string>();
    b.functions.forEach((f, i) => {
      if (seen.has(f.name)) ctx.addIssue({ code: 'custom', path: ['functions', i, 'name'], message: `duplicate function '${f.name}'` });
      seen.add(f.name);
    });
  });
export type FunctionBundle = z.infer<typeof FunctionBundleSchema>;

const NumberTree: z.ZodType<unknown> = z.lazy(() => z.union([z.number(), z.boolean(), z.string(), z.array(NumberTree)]));

/** One input value in a JSON call: a (nested) array, a scalar, base64 bytes, or an explicit tensor. */
export const InputValueSchema = z.union([
  z
    .object({
      data: NumberTree,
      shape: z.array(z.number().int().min(0)).optional(),
      datatype: z.string().optional(),
    })
    .strict()
    .describe('explicit tensor'),
  z.object({ b64: z.string() }).strict().describe('bytes as base64 (UINT8 or BYTES inputs)'),
  NumberTree.describe('values; nested arrays give the shape'),
]);

/** The JSON body of POST /fn/<name>. */
export const CallBodySchema = z
  .object({
    inputs: z.record(z.string(), InputValueSchema),
    outputs: z.array(z.string()).optional().describe('return only these outputs'),
  })
  .strict();
export type CallBody = z.infer<typeof CallBodySchema>;

export const OutputTensorSchema = z.object({
  shape: z.array(z.number().int()),
  datatype: z.string(),
  data: z.array(z.union([z.number(), z.boolean(), z.string()])),
});

/** The JSON reply of POST /fn/<name>. */
export const CallReplySchema = z.object({
  outputs: z.record(z.string(), OutputTensorSchema),
});

export const ErrorReplySchema = z.object({
  error: z.object({ code: z.string(), message: z.string() }),
});

/** One tensor as GET /fn describes it. */
export const TensorDescriptionSchema = z.object({
  name: z.string(),
  tensor: z.string(),
  datatype: z.string(),
  shape: z.array(z.number().int()),
});

/** A flat list of zod issues as `path: message` lines (for start-up and deploy errors). */
export function describeIssues(err: z.ZodError, prefix = ''): string[] {
  return err.issues.map((i) => `${prefix}${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`);
}
