// Builds a gateway's progressive delivery and usage plans from its parts:
// the stores (Redis when configured, shared by replicas; memory otherwise),
// the rollout manager with its promote step (a new bundle version through
// the deployer), the usage plans, and the admin routes' dependencies.
import type { EngineClient } from '../upstream/engine-client.ts';
import { implicitDefinition, type FunctionRegistry } from '../calls/function-registry.ts';
import type { FunctionDeployer } from '../deploy/function-deployer.ts';
import { MemoryPlanStore, RedisPlanStore } from '../plans/plan-store.ts';
import { UsagePlans } from '../plans/plan-gate.ts';
import { retarget } from './rollout-check.ts';
import { RolloutManager } from './rollout-manager.ts';
import type { RolloutRouteDeps } from './rollout-routes.ts';
import { MemoryRolloutStore, type RolloutStore } from './rollout-store.ts';
import { RedisRolloutStore } from './redis-rollout-store.ts';

export interface Delivery {
  manager: RolloutManager;
  store: RolloutStore;
  plans: UsagePlans;
  routes: RolloutRouteDeps;
  stop(): Promise<void>;
}

export interface DeliveryOptions {
  redisUrl?: string;
  namespace: string;
  owner: string;
  registry: FunctionRegistry;
  engine: EngineClient;
  deployer: FunctionDeployer;
  tickMs?: number;
  planPollMs?: number;
}

export async function startDelivery(o: DeliveryOptions): Promise<Delivery> {
  const store: RolloutStore = o.redisUrl ? new RedisRolloutStore(o.redisUrl, { namespace: o.namespace }) : new MemoryRolloutStore();
  const planStore = o.redisUrl ? new RedisPlanStore(o.redisUrl, { namespace: o.namespace }) : new MemoryPlanStore();
  const resolve = (name: string) => o.registry.resolve(name);
  const manager = new RolloutManager({
    store,
    resolve,
    engine: o.engine,
    owner: o.owner,
    tickMs: o.tickMs,
    promote: async (name, target) => {
      const functions = [...(o.deployer.active?.functions ?? o.registry.definitions())];
      const i = functions.findIndex((f) => f.name === name);
      const next = retarget(i >= 0 ? functions[i]! : implicitDefinition(name), target);
      if (i >= 0) functions[i] = next;
      else functions.push(next);
      return (await o.deployer.deploy({ functions })).version;
    },
  });
  await manager.start();
  const plans = new UsagePlans(planStore, o.planPollMs);
  await plans.start();
  return {
    manager,
    store,
    plans,
    routes: { store, manager, resolve, engine: o.engine, bundleVersion: () => o.registry.version },
    stop: async () => {
      plans.stop();
      await manager.stop();
      await store.close();
      await planStore.close();
    },
  };
}
