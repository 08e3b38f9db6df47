// The async and inbound-webhook front of POST /fn/<name>, and GET /jobs/<id>.
// The middleware runs before invoke.ts's synchronous handler:
//  - a function with `webhook` settings is called by third-party webhooks:
//    the signature is checked (401 from the catalog on a bad or missing one),
//    the event's fields are mapped to inputs, and the call runs (or becomes
//    a job with `webhook.respondAsync`);
//  - `Prefer: respond-async` or `X-Callback-Url` makes the call a job: the
//    function, key, callback URL (allowlist) and inputs are checked now, the
//    body is captured, and the reply is `202 {"id", "status_url"}`;
//  - anything else goes on to the synchronous handler.
// GET /jobs/<id> answers only whoever may call the job's function (job-access.ts).
import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { GatewayEnv } from '../core/gateway-env.ts';
import { checkApiKey, presentedKey } from '../calls/api-key.ts';
import { readBody } from '../calls/body-reader.ts';
import { GatewayError, gatewayError } from '../core/errors.ts';
import type { ResolvedFunction } from '../calls/function-registry.ts';
import { AsyncSchema, type FunctionDefinition } from '../calls/function-schema.ts';
import { CallSlices, type InvokeDeps } from '../calls/invoke.ts';
import { checkCallbackUrl } from '../webhooks/callback-allow.ts';
import { checkInbound, mapEventToInputs } from '../webhooks/inbound.ts';
import { checkJobAccess, isJobId, jobKeyHash, newJobId } from './job-access.ts';
import { decodeCall, runStoredCall, type StoredCall } from './job-call.ts';
import type { JobQueue } from './job-queue.ts';
import type { CallbackSpec } from './job-state.ts';
import { publicView } from './job-state.ts';

export interface AsyncDeps {
  queue: JobQueue;
  /** Environment for secrets and GATEWAY_CALLBACK_ALLOW (default process.env). */
  env?: NodeJS.ProcessEnv;
}

const DEFAULT_ASYNC = AsyncSchema.parse({});

/** True when the request asks for an asynchronous call. */
export function wantsAsync(c: Context): boolean {
  if (c.req.header('x-callback-url')) return true;
  return (c.req.header('prefer') ?? '').split(',').some((p) => p.trim().toLowerCase() === 'respond-async');
}

/** The HMAC key for a function's callbacks: its async.secretEnv variable, else GATEWAY_WEBHOOK_SECRET. */
export function callbackSecret(secretEnv: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  return (secretEnv ? env[secretEnv] : undefined) || env.GATEWAY_WEBHOOK_SECRET || undefined;
}

async function accept(
  c: Context,
  deps: AsyncDeps,
  fn: ResolvedFunction,
  call: StoredCall,
  callbackUrl: string | undefined,
  apiKey?: string,
): Promise<Response> {
  const env = deps.env ?? process.env;
  const a = fn.definition.async ?? DEFAULT_ASYNC;
  let callback: CallbackSpec | undefined;
  if (callbackUrl !== undefined) {
    const checked = checkCallbackUrl(callbackUrl, a.callbackAllow, env);
    if ('reason' in checked) {
      if (checked.invalid) throw gatewayError('CALLBACK_URL_INVALID', { reason: checked.reason });
      throw gatewayError('CALLBACK_URL_NOT_ALLOWED', { url: callbackUrl, name: fn.name, reason: checked.reason });
    }
    if (!callbackSecret(a.secretEnv, env)) throw gatewayError('CALLBACK_SECRET_MISSING', { name: fn.name });
    callback = {
      url: checked.url.toString(),
      ...(a.secretEnv ? { secretEnv: a.secretEnv } : {}),
      maxAttempts: a.maxDeliveryAttempts,
      backoffMs: a.backoffMs,
      maxBackoffMs: a.maxBackoffMs,
      attemptTimeoutMs: a.attemptTimeoutMs,
    };
  }
  await decodeCall(fn, call); // bad inputs are refused now (400), not as a failed job
  // The key the call was made with guards its result (job-access.ts).
  const id = newJobId();
  const keyHash = fn.definition.auth && apiKey ? jobKeyHash(id, apiKey) : undefined;
  let rec;
  try {
    rec = await deps.queue.enqueue({ id, fn: fn.name, payload: call, callback, retentionMs: a.resultTtlMs, keyHash });
  } catch (e) {
    if (e instanceof GatewayError) throw e; // JOBS_FULL: the in-memory store's bound
    throw gatewayError('JOBS_UNAVAILABLE', {}, e);
  }
  const statusUrl = new URL(`/jobs/${rec.id}`, c.req.url).toString();
  c.header('Location', statusUrl);
  return c.json({ id: rec.id, status_url: statusUrl }, 202);
}

async function inbound(c: Context<GatewayEnv>, invokeDeps: InvokeDeps, deps: AsyncDeps, fn: ResolvedFunction): Promise<Response> {
  const w = fn.definition.webhook!;
  const env = deps.env ?? process.env;
  const secret = env[w.secretEnv];
  if (!secret) throw gatewayError('WEBHOOK_SECRET_MISSING', { name: fn.name, env: w.secretEnv });
  const raw = await readBody(c, fn.definition.limits.maxBodyBytes, fn.name);
  const verdict = checkInbound(w, secret, (h) => c.req.header(h), raw);
  if (verdict) throw gatewayError('WEBHOOK_SIGNATURE_INVALID', { name: fn.name, reason: verdict });
  let mapped: { inputs: Record<string, unknown> };
  try {
    mapped = mapEventToInputs(JSON.parse(raw.toString('utf8')), w.inputs, (i) => fn.inputs.find((s) => s.name === i)?.datatype);
  } catch (e) {
    throw gatewayError('WEBHOOK_EVENT_INVALID', { name: fn.name, reason: (e as Error).message });
  }
  const call: StoredCall = { contentType: 'application/json', body: Buffer.from(JSON.stringify(mapped)).toString('base64') };
  if (w.respondAsync || wantsAsync(c)) return accept(c, deps, fn, call, undefined);
  const id = c.req.header('x-request-id') ?? crypto.randomUUID();
  c.header('X-Request-Id', id);
  const slices = new CallSlices(invokeDeps.arena);
  try {
    return c.json((await runStoredCall(invokeDeps, fn, call, id, slices)).body as object);
  } finally {
    c.set('transfer', slices.transfer); // refused after staging: still 'shm'
  }
}

/** Middleware for POST /fn/:name (mounted between app.ts's in-flight counter and invoke). */
export function asyncCalls(invokeDeps: InvokeDeps, deps: AsyncDeps): MiddlewareHandler<GatewayEnv> {
  // Which names declare inbound webhooks, per registry version: a plain call pays one Set lookup.
  let hooks = { version: '', names: new Set<string>() };
  const webhookNames = () => {
    const v = invokeDeps.registry.version;
    if (hooks.version !== v)
      hooks = {
        version: v,
        names: new Set(
          invokeDeps.registry
            .definitions()
            .filter((d) => d.webhook)
            .map((d) => d.name),
        ),
      };
    return hooks.names;
  };
  return async (c, next) => {
    if (!wantsAsync(c)) {
      if (!webhookNames().has(c.req.param('name')!)) return next();
      const fn = await invokeDeps.registry.resolve(c.req.param('name')!);
      if (!fn.definition.webhook) return next();
      c.set('fn', fn.name);
      return inbound(c, invokeDeps, deps, fn);
    }
    const fn = await invokeDeps.registry.resolve(c.req.param('name')!);
    c.set('fn', fn.name);
    if (fn.definition.webhook) return inbound(c, invokeDeps, deps, fn);
    checkApiKey(fn.definition, (h) => c.req.header(h));
    if (fn.definition.async && !fn.definition.async.enabled) throw gatewayError('ASYNC_DISABLED', { name: fn.name });
    const body = await readBody(c, fn.definition.limits.maxBodyBytes, fn.name);
    const call: StoredCall = { contentType: c.req.header('content-type') ?? 'application/octet-stream', body: body.toString('base64') };
    const output = c.req.query('output');
    if (output) call.output = output;
    return accept(
      c,
      deps,
      fn,
      call,
      c.req.header('x-callback-url'),
      presentedKey((h) => c.req.header(h)),
    );
  };
}

/**
 * GET /jobs/:id — the job's state, with its result or error while retained,
 * to whoever may call its function; `definition` looks the function up as
 * defined now.
 */
export function mountJobRoutes(app: Hono<GatewayEnv>, deps: AsyncDeps, definition: (name: string) => FunctionDefinition | undefined): void {
  app.get('/jobs/:id', async (c) => {
    const id = c.req.param('id');
    if (!isJobId(id)) throw gatewayError('JOB_NOT_FOUND', { id: id.slice(0, 64) });
    let rec;
    try {
      rec = await deps.queue.get(id);
    } catch (e) {
      throw gatewayError('JOBS_UNAVAILABLE', {}, e);
    }
    if (!rec) throw gatewayError('JOB_NOT_FOUND', { id });
    checkJobAccess(
      rec,
      presentedKey((h) => c.req.header(h)),
      definition(rec.fn),
      deps.env ?? process.env,
    );
    c.header('Cache-Control', 'no-store');
    return c.json(publicView(rec));
  });
}
