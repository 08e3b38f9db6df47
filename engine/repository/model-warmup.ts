// model_warmup: synthetic requests run through a version's scheduler before it
// reports READY (Triton's ModelWarmup: zero_data, random_data, input_data_file).
import fs from 'node:fs';
import path from 'node:path';
import type { ModelConfig } from '../api/model-config.ts';
import type { InferRequest } from '../api/infer-request.ts';
import type { ExecutionInstance, Scheduler } from '../api/scheduler.ts';
import { byteSizeOf, fromConfigType, serializeBytes } from '../api/datatypes.ts';
import { invalidArg } from '../api/status.ts';
import { log } from '../../common/logger.ts';
import { reshapeInputs } from '../config/reshape.ts';

/** Run every warmup sample `count` times; a failure fails the load. */
export async function runWarmup(config: ModelConfig, scheduler: Scheduler, modelDir: string): Promise<void> {
  for (const w of config.model_warmup ?? []) {
    const batch = Math.max(1, w.batch_size || 1);
    const inputs = Object.entries(w.inputs ?? {}).map(([name, spec]) => {
      const datatype = fromConfigType(spec.data_type);
      const shape = config.max_batch_size > 0 ? [batch, ...spec.dims] : [...spec.dims];
      let data: Uint8Array;
      if (datatype === 'BYTES') {
        const n = shape.reduce((a, b) => a * b, 1);
        data = serializeBytes(Array.from({ length: n }, () => (spec.random_data ? String(Math.random()) : '')));
      } else if (spec.input_data_file) {
        const file = path.join(modelDir, 'warmup', spec.input_data_file);
        if (!fs.existsSync(file)) throw invalidArg(`model '${config.name}' warmup '${w.name}': missing ${file}`);
        data = new Uint8Array(fs.readFileSync(file));
      } else {
        data = new Uint8Array(byteSizeOf(datatype, shape));
        if (spec.random_data) for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761) >>> 24;
      }
      return { name, datatype, shape, data };
    });
    for (let i = 0; i < Math.max(1, w.count ?? 1); i++) {
      // Samples are in the config's dims: the backend gets them reshaped, like any request.
      const req: InferRequest = {
        modelName: config.name,
        id: `warmup:${w.name}`,
        inputs: reshapeInputs(config, inputs),
        outputs: [],
        parameters: {},
        arrivalNs: process.hrtime.bigint(),
      };
      try {
        await scheduler.enqueue(req);
      } catch (err) {
        throw invalidArg(`model '${config.name}' warmup '${w.name}' failed: ${(err as Error).message}`);
      }
    }
    log.info(`model '${config.name}': warmup '${w.name}' done (${w.count ?? 1}x, batch ${batch})`);
  }
}

/**
 * Under the memory budget, a model with no model_warmup is warmed on every
 * instance at once with zeros at its largest batch (variable dims as 1), so
 * the arenas a run grows are there when the load is measured (ours; Triton
 * warms only what model_warmup lists). A model that refuses zeros only logs:
 * it is charged what it has then, and the memory monitor charges the rest.
 */
export async function runSyntheticWarmup(config: ModelConfig, instances: readonly ExecutionInstance[]): Promise<void> {
  if (config.model_warmup?.length || config.sequence_batching || !instances.length || !config.input?.length) return;
  const batch = Math.max(1, config.max_batch_size);
  const inputs = config.input.map((t) => {
    const datatype = fromConfigType(t.data_type);
    const dims = t.dims.map((d) => (d < 0 ? 1 : d));
    const shape = config.max_batch_size > 0 ? [batch, ...dims] : dims;
    const n = shape.reduce((a, b) => a * b, 1);
    const data = datatype === 'BYTES' ? serializeBytes(Array.from({ length: n }, () => '')) : new Uint8Array(byteSizeOf(datatype, shape));
    return { name: t.name, datatype, shape, data };
  });
  const t0 = performance.now();
  const results = await Promise.allSettled(
    instances.map((inst) =>
      inst.execute([
        { modelName: config.name, id: 'warmup:synthetic', inputs, outputs: [], parameters: {}, arrivalNs: process.hrtime.bigint() },
      ]),
    ),
  );
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed)
    log.warn(
      `model '${config.name}': synthetic warmup at batch ${batch} failed (${(failed.reason as Error)?.message}); charged what it holds without it`,
    );
  else
    log.info(
      `model '${config.name}': synthetic warmup at batch ${batch} on ${instances.length} instance(s) in ${(performance.now() - t0).toFixed(0)} ms`,
    );
}
