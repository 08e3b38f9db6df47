// The python backend's per-model execution limit (ours, opt-in):
// `parameters { key: "execute_timeout_secs" value: { string_value: "5" } }`.
// An execute() (for a decoupled model: until its last response) still
// running after that long has its stub killed; the requests of that batch
// fail with an error naming the model and the limit, and the stub starts
// again at once. Without it a stuck execute holds its instance until the
// model is unloaded (--exit-timeout-secs).
import type { ModelConfig } from '../../api/model-config.ts';
import { invalidArg, unavailable, type StatusError } from '../../api/status.ts';

/** The config parameter's name. */
export const EXECUTE_TIMEOUT_PARAM = 'execute_timeout_secs';

/** The limit in ms, or undefined when the model sets none; INVALID_ARG naming the parameter when malformed. */
export function executeTimeoutMs(config: ModelConfig): number | undefined {
  const raw = config.parameters?.[EXECUTE_TIMEOUT_PARAM]?.string_value;
  if (raw === undefined || raw.trim() === '') return undefined;
  const secs = Number(raw);
  if (!Number.isFinite(secs) || secs <= 0 || secs > 86_400) {
    throw invalidArg(
      `model '${config.name}': parameter ${EXECUTE_TIMEOUT_PARAM} must be a number of seconds above 0 (at most 86400), got '${raw}'`,
    );
  }
  return Math.ceil(secs * 1000);
}

/** The error of each request of a batch whose execute passed the limit. */
export function overrunError(model: string, instance: string, ms: number): StatusError {
  return unavailable(
    `python model '${model}' instance ${instance}: execute did not return within ${EXECUTE_TIMEOUT_PARAM}=${ms / 1000}; ` +
      `its stub was killed and is starting again`,
  );
}

/** The error of a request that was executing when the model was unloaded and its stub killed. */
export function unloadedWhileExecuting(model: string, instance: string): StatusError {
  return unavailable(
    `model '${model}' was unloaded while this request was executing on instance ${instance}: ` +
      `its python stub was still running after the exit timeout and was killed`,
  );
}

/** The error of a request that reached an instance of a model being unloaded. */
export function unloadedBeforeRun(model: string): StatusError {
  return unavailable(`model '${model}' was unloaded before this request ran`);
}
