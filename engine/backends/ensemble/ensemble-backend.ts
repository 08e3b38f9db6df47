// The ensemble platform: no instances of its own; its plan is built and
// validated once at load and run by an EnsembleScheduler. An ensemble with a
// decoupled step is decoupled itself: its config says so, as Triton's does
// (model_transaction_policy { decoupled: true }), so unary endpoints refuse it
// and clients know to stream.
import path from 'node:path';
import type { Backend, BackendContext, BackendModel } from '../../api/backend.ts';
import { buildEnsemblePlan } from '../../config/ensemble-utils.ts';
import { EnsembleScheduler } from '../../scheduling/ensemble-scheduler.ts';
import type { ModelStatistics } from '../../api/model-statistics.ts';

export const ensembleBackend: Backend = {
  name: 'ensemble',
  defaultModelFilename: '',
  async load(ctx: BackendContext): Promise<BackendModel> {
    const file = path.join(ctx.modelName, 'config.pbtxt');
    const plan = buildEnsemblePlan(ctx.config, ctx.lookupConfig, file);
    // Triton sets it from the steps, whatever the file said.
    if (plan.decoupled || ctx.config.model_transaction_policy !== undefined) {
      ctx.config.model_transaction_policy = { ...(ctx.config.model_transaction_policy as object | undefined), decoupled: plan.decoupled };
    }
    return {
      instances: [],
      createScheduler: (stats) => new EnsembleScheduler(plan, ctx.infer, stats as ModelStatistics, String(ctx.version)),
      finalize: async () => undefined,
    };
  },
};
