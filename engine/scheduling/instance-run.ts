// Running one batch on one execution instance, shared by every scheduler:
// shm inputs checked right before (a truncated region fails its own request),
// and whatever the instance does (throw, reject, a wrong number of responses)
// turned into StatusErrors. Never throws.
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ExecuteResult, ExecutionInstance } from '../api/scheduler.ts';
import { internal, StatusError, toStatusError } from '../api/status.ts';
import { log } from '../../common/logger.ts';

/**
 * Run `requests` on `instance` and check the result's shape. Never throws: an
 * execute that throws or rejects, or answers the wrong number of responses,
 * becomes one StatusError for the whole batch.
 */
export async function runOnInstance(
  instance: ExecutionInstance,
  requests: InferRequest[],
  modelName: string,
): Promise<ExecuteResult | StatusError> {
  // Shm inputs are checked right before the execution reads them: a region
  // truncated while the request waited fails that request, not the batch.
  const lost = requests.map(shmProblem);
  if (lost.some((e) => e)) return runWithout(instance, requests, lost, modelName);
  return runChecked(instance, requests, modelName);
}

/** The first shm input of `r` whose region no longer holds its bytes, as a StatusError. */
function shmProblem(r: InferRequest): StatusError | undefined {
  for (const t of r.inputs) {
    const e = t.shmCheck?.();
    if (e) return toStatusError(e);
  }
  return undefined;
}

/** Run the requests whose inputs are intact; the others answer their own error. */
async function runWithout(
  instance: ExecutionInstance,
  requests: InferRequest[],
  lost: Array<StatusError | undefined>,
  modelName: string,
): Promise<ExecuteResult | StatusError> {
  const keep = requests.filter((_, i) => !lost[i]);
  const zero = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };
  const ran = keep.length ? await runChecked(instance, keep, modelName) : { responses: [], timing: zero };
  const merge = (got: Array<InferResponse | StatusError> | StatusError) => {
    let k = 0;
    return requests.map((_, i) => lost[i] ?? (got instanceof StatusError ? got : got[k++]!));
  };
  if (ran instanceof StatusError) return { responses: merge(ran), timing: zero };
  if (ran.streams) return { responses: [], timing: ran.timing, streams: ran.streams.then(merge) };
  return { responses: merge(ran.responses), timing: ran.timing };
}

/**
 * The final outcome of each request of `result`: its responses, or, for a
 * decoupled instance that is already free (ExecuteResult.streams), the
 * outcomes once every stream ended. Never rejects.
 */
export async function finalOutcomes(
  result: ExecuteResult,
  count: number,
  instance: string,
  modelName: string,
): Promise<Array<InferResponse | StatusError>> {
  if (!result.streams) return result.responses;
  try {
    const got = await result.streams;
    if (Array.isArray(got) && got.length === count) return got;
    const e = internal(`instance '${instance}' of model '${modelName}' ended ${got?.length} streams for ${count} requests`);
    return Array.from({ length: count }, () => e);
  } catch (err) {
    const e = toStatusError(err);
    return Array.from({ length: count }, () => e);
  }
}

async function runChecked(instance: ExecutionInstance, requests: InferRequest[], modelName: string): Promise<ExecuteResult | StatusError> {
  try {
    const result = await instance.execute(requests);
    if (result?.streams) return result;
    if (!result || !Array.isArray(result.responses) || result.responses.length !== requests.length) {
      return internal(
        `instance '${instance.name}' of model '${modelName}' returned ${result?.responses?.length} responses for ${requests.length} requests`,
      );
    }
    return result;
  } catch (err) {
    const e = toStatusError(err);
    if (!(err instanceof StatusError)) log.error(`instance '${instance.name}' of model '${modelName}' failed`, err);
    return e;
  }
}
