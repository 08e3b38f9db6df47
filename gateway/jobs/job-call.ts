// A call of a function captured as JSON (so a job can wait in Redis and run on
// any replica) and run without HTTP: the body bytes as base64 with their
// content type, decoded with the same codec as POST /fn/<name> and run
// through invoke.ts's runFunction, so the result is exactly the synchronous
// reply body `{"outputs": ...}` and a failure is the same catalog error.
import { gatewayError } from '../core/errors.ts';
import type { ResolvedFunction } from '../calls/function-registry.ts';
import { buildRequest, CallSlices, runFunction, type InvokeDeps } from '../calls/invoke.ts';
import { collectStream, FunctionStream, isStreamingFunction } from '../calls/function-stream.ts';
import { selectOutputs } from '../calls/output-select.ts';
import { replyJson } from '../calls/reply-rows.ts';
import {
  bytesInput,
  isJsonType,
  isRawType,
  jsonBodyInputs,
  mediaType,
  multipartBodyInputs,
  rawBodySpec,
  type InputTensor,
} from '../calls/payload-codec.ts';

/** One captured call. */
export interface StoredCall {
  contentType: string;
  /** The request body, base64. */
  body: string;
  /** `?output=NAME` of the original request. */
  output?: string;
}

/** Decode a call's inputs as POST /fn/<name> would; throws the same catalog errors. */
export async function decodeCall(fn: ResolvedFunction, call: StoredCall): Promise<{ inputs: InputTensor[]; outputs?: string[] }> {
  const bytes = Buffer.from(call.body, 'base64');
  const type = mediaType(call.contentType);
  if (isJsonType(type)) return jsonBodyInputs(fn, bytes);
  if (type === 'multipart/form-data') {
    return {
      inputs: await multipartBodyInputs(fn, () => new Response(bytes, { headers: { 'Content-Type': call.contentType } }).formData()),
    };
  }
  if (!isRawType(type)) throw gatewayError('MEDIA_TYPE_UNSUPPORTED', { type });
  return { inputs: [bytesInput(fn, rawBodySpec(fn), bytes)] };
}

/**
 * Run a captured call of `fn`; resolves with the reply JSON and how the
 * payload travelled (`slices.transfer` tells it after a failure too).
 */
export async function runStoredCall(
  deps: InvokeDeps,
  fn: ResolvedFunction,
  call: StoredCall,
  id: string,
  slices = new CallSlices(deps.arena),
): Promise<{ body: unknown; transfer: 'inline' | 'shm' }> {
  const { inputs, outputs } = await decodeCall(fn, call);
  const specs = selectOutputs(fn, call.output, outputs);
  if (await isStreamingFunction(deps, fn)) {
    // A streaming function's job stores every response: the array a plain JSON call gets (stream-routes.ts).
    const req = buildRequest(
      fn,
      id,
      inputs,
      specs.map((s) => ({ name: s.tensor })),
      false,
    );
    return { body: await collectStream(new FunctionStream(deps, fn, req, specs), fn), transfer: 'inline' };
  }
  try {
    const r = await runFunction(deps, fn, inputs, specs, id, slices);
    return { body: replyJson(fn, r.outputs), transfer: r.transfer };
  } finally {
    slices.releaseAll();
  }
}

/** The runner's `invoke`: resolve the function now and run the stored call. */
export function jobInvoker(deps: InvokeDeps): (fn: string, payload: unknown) => Promise<unknown> {
  return async (name, payload) => {
    const fn = await deps.registry.resolve(name);
    return (await runStoredCall(deps, fn, payload as StoredCall, crypto.randomUUID())).body;
  };
}
