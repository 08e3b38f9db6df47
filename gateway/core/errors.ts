// The gateway's error catalog (after fastify lib/errors.js): every error a
// client can see has a stable code, a message template and an HTTP status.
// docs/gateway/errors.md carries the same table; test/unit/gateway-errors.test.ts
// keeps the two in step. Handlers throw GatewayError; app.ts's one onError
// turns it into `{"error": {"code", "message"}}`.
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

interface CatalogEntry {
  readonly status: ContentfulStatusCode;
  /** `{param}` placeholders are filled from the params object. */
  readonly message: string;
}

/** The closed set of gateway errors. */
export const ERROR_CATALOG = {
  FUNCTION_NOT_FOUND: { status: 404, message: "function '{name}' not found" },
  FUNCTION_UNAVAILABLE: { status: 503, message: "function '{name}' is unavailable: target model '{model}' is not ready" },
  FUNCTION_MISCONFIGURED: { status: 500, message: "function '{name}' does not match its target '{model}': {reason}" },
  BODY_INVALID: { status: 400, message: 'request body is invalid: {reason}' },
  INPUT_MISSING: { status: 400, message: "function '{name}' requires input '{input}'" },
  INPUT_UNKNOWN: { status: 400, message: "function '{name}' has no input '{input}'" },
  INPUT_INVALID: { status: 400, message: "input '{input}' of function '{name}' is invalid: {reason}" },
  RAW_BODY_AMBIGUOUS: {
    status: 400,
    message: "function '{name}' needs a JSON or multipart body: a raw body fills only a single UINT8 or BYTES input",
  },
  MEDIA_TYPE_UNSUPPORTED: { status: 415, message: "content type '{type}' is not supported; send JSON, multipart/form-data or raw bytes" },
  OUTPUT_NOT_ACCEPTABLE: {
    status: 406,
    message: "function '{name}' has {count} outputs; 'Accept: application/octet-stream' needs exactly one (choose it with ?output=NAME)",
  },
  OUTPUT_UNKNOWN: { status: 400, message: "function '{name}' has no output '{output}'" },
  BODY_TOO_LARGE: { status: 413, message: "request body exceeds the limit of {limit} bytes for function '{name}'" },
  REQUEST_TIMEOUT: {
    status: 408,
    message: 'the request was not received in time (headers within {headersMs} ms, body within {bodyMs} ms); the connection is closed',
  },
  API_KEY_MISSING: { status: 401, message: "function '{name}' requires an API key (header X-API-Key or Authorization: Bearer)" },
  API_KEY_INVALID: { status: 403, message: "the API key is not valid for function '{name}'" },
  ENGINE_REJECTED: { status: 400, message: "the engine rejected the call to '{name}': {reason}" },
  ENGINE_TIMEOUT: { status: 504, message: "the engine did not answer the call to '{name}' within {timeoutMs} ms" },
  ENGINE_UNAVAILABLE: { status: 503, message: 'the inference engine at {address} is unavailable; retry later' },
  ENGINE_ERROR: { status: 502, message: "the engine failed the call to '{name}'" },
  STREAM_RESPONSE_ERROR: { status: 502, message: "the model behind streaming function '{name}' answered with an error: {reason}" },
  STREAM_TOO_LARGE: {
    status: 502,
    message:
      "the responses of streaming function '{name}' exceed {limit} bytes collected as one JSON array; read them as a stream (Accept: text/event-stream or application/x-ndjson)",
  },
  GATEWAY_BUSY: {
    status: 503,
    message: 'this gateway has {limit} calls in flight or waiting per {scope} already; retry after {retryAfterS} s',
  },
  SHM_EXHAUSTED: {
    status: 503,
    message:
      "shared memory for staging is exhausted on this gateway's host and the payload of {size} bytes is over the engine's inline limit of {limit} bytes; retry later",
  },
  GATEWAY_SHUTTING_DOWN: { status: 503, message: 'this gateway is shutting down; retry on another replica' },
  ROUTE_NOT_FOUND: { status: 404, message: 'no route for {method} {path}' },
  ASYNC_DISABLED: { status: 400, message: "function '{name}' does not accept asynchronous calls" },
  CALLBACK_URL_INVALID: { status: 400, message: 'the callback URL is invalid: {reason}' },
  CALLBACK_URL_NOT_ALLOWED: { status: 400, message: "callback URL '{url}' is not allowed for function '{name}': {reason}" },
  CALLBACK_SECRET_MISSING: {
    status: 500,
    message: "function '{name}' has no key to sign callbacks: set the variable named by async.secretEnv, or GATEWAY_WEBHOOK_SECRET",
  },
  JOB_NOT_FOUND: { status: 404, message: "job '{id}' not found (unknown, or past its retention time)" },
  JOB_KEY_MISSING: {
    status: 401,
    message:
      "job '{id}' belongs to a function that needs an API key: send the key the call was made with (X-API-Key or Authorization: Bearer)",
  },
  JOB_KEY_INVALID: { status: 403, message: "the API key does not give access to job '{id}'" },
  JOBS_UNAVAILABLE: { status: 503, message: 'the job queue is unavailable; retry later' },
  JOBS_FULL: { status: 503, message: "this gateway's in-memory job store holds {limit} of unfinished jobs already; retry later" },
  WEBHOOK_SIGNATURE_INVALID: { status: 401, message: "the webhook signature for function '{name}' is not valid: {reason}" },
  WEBHOOK_SECRET_MISSING: {
    status: 500,
    message: "function '{name}' cannot verify webhooks: its signing secret variable '{env}' is not set",
  },
  WEBHOOK_EVENT_INVALID: { status: 400, message: "the webhook event for function '{name}' is invalid: {reason}" },
  ADMIN_DISABLED: { status: 403, message: 'admin routes are disabled: GATEWAY_ADMIN_TOKEN is not set' },
  ADMIN_TOKEN_MISSING: { status: 401, message: "admin routes need 'Authorization: Bearer <GATEWAY_ADMIN_TOKEN>'" },
  ADMIN_TOKEN_INVALID: { status: 403, message: 'the admin token is not valid' },
  BUNDLE_INVALID: { status: 400, message: 'function bundle refused with {count} error(s); nothing changed' },
  BUNDLE_VERSION_CONFLICT: { status: 409, message: "version '{version}' is already deployed with different content" },
  ROLLBACK_UNAVAILABLE: { status: 409, message: 'there is no previous function bundle to roll back to' },
  DEPLOY_UNAVAILABLE: { status: 503, message: 'the function bundle store is unavailable; nothing changed' },
  ROLLOUT_INVALID: { status: 400, message: 'rollout refused with {count} error(s); nothing changed' },
  ROLLOUT_CONFLICT: { status: 409, message: "function '{name}' already has a rollout running; abort it or wait for its decision" },
  ROLLOUT_NOT_FOUND: { status: 404, message: "rollout '{id}' not found" },
  ROLLOUT_FINISHED: { status: 409, message: "rollout '{id}' is already over ({state})" },
  RATE_LIMITED: {
    status: 429,
    message: "the rate limit of plan '{plan}' ({rps} calls/s, burst {burst}) is used up; retry after {retryAfter} s",
  },
  QUOTA_EXCEEDED: { status: 429, message: "the {period} quota of plan '{plan}' ({limit} calls) is used up; it renews in {retryAfter} s" },
  PLAN_INVALID: { status: 400, message: 'usage plan refused: {reason}; nothing changed' },
  PLAN_KEY_MISSING: { status: 401, message: 'send your API key (X-API-Key or Authorization: Bearer) to read its plan and usage' },
  PLANS_UNAVAILABLE: { status: 503, message: 'the usage plan store is unavailable; retry later' },
  CONSOLE_TOKEN_MISSING: { status: 401, message: "the console needs a token: send 'X-Console-Token: <GATEWAY_CONSOLE_TOKEN>'" },
  CONSOLE_TOKEN_INVALID: { status: 403, message: 'the console token is not valid' },
  CONSOLE_LOCAL_ONLY: {
    status: 403,
    message:
      'the console answers this machine only (loopback, no proxy) while GATEWAY_CONSOLE_TOKEN is not set; set it to open the console to other hosts',
  },
  INTERNAL: { status: 500, message: 'internal gateway error' },
} as const satisfies Record<string, CatalogEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

/** An error from the catalog, carrying its code, status and filled message. */
export class GatewayError extends HTTPException {
  readonly code: ErrorCode;
  readonly params: Record<string, string | number>;
  /** Reply headers the error carries (429s: Retry-After, RateLimit-*). */
  headers?: Record<string, string>;
  /** Every problem, for refusals that list them (`errors` in the body). */
  details?: string[];

  constructor(code: ErrorCode, params: Record<string, string | number> = {}, cause?: unknown) {
    const entry: CatalogEntry = ERROR_CATALOG[code];
    super(entry.status, { message: formatMessage(entry.message, params), cause });
    this.name = 'GatewayError';
    this.code = code;
    this.params = params;
  }

  /** The JSON body of the reply. */
  toJSON(): { error: { code: ErrorCode; message: string; errors?: string[] } } {
    return { error: { code: this.code, message: this.message, ...(this.details ? { errors: this.details } : {}) } };
  }
}

/** Fill `{param}` placeholders; unknown ones stay visible to show the bug. */
export function formatMessage(template: string, params: Record<string, string | number>): string {
  return template.replace(/\{(\w+)\}/g, (m, k: string) => (k in params ? String(params[k]) : m));
}

/** Shorthand: `throw gatewayError('INPUT_MISSING', { name, input })`. */
export function gatewayError(code: ErrorCode, params: Record<string, string | number> = {}, cause?: unknown): GatewayError {
  return new GatewayError(code, params, cause);
}

/** The catalog as a Markdown table (docs/gateway/errors.md's copy; kept in step by a test). */
export function catalogMarkdown(): string {
  const rows = Object.entries(ERROR_CATALOG).map(([code, e]) => `| \`${code}\` | ${e.status} | ${e.message.replace(/\|/g, '\\|')} |`);
  return ['| code | HTTP | message |', '|---|---|---|', ...rows].join('\n');
}
