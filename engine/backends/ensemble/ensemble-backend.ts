// The ensemble platform: no instances of its own; its plan is built and
// validated once at load and run by an EnsembleScheduler.
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
    return {
      instances: [],
      createScheduler: (stats) => new EnsembleScheduler(plan, ctx.infer, stats as ModelStatistics, String(ctx.version)),
      finalize: async () => undefined,
    };
  },
};
