// The memory budget's per-model figures as the HTTP repository index shows
// them (ours; Triton's index has no such fields).
import type { ModelIndexEntry } from '../api/server-api.ts';
import type { MemoryBudget } from './model-memory-budget.ts';

type BudgetFields = Pick<
  ModelIndexEntry,
  | 'resident_bytes'
  | 'load_bytes'
  | 'cold_loads'
  | 'cold_load_ms_total'
  | 'last_cold_load_ms'
  | 'cold_load_room_ms_total'
  | 'cold_load_backend_ms_total'
  | 'cold_load_warmup_ms_total'
  | 'evictions_caused'
  | 'evicted'
>;

/** Empty without a budget; resident and load bytes only while the model is loaded. */
export function budgetFields(budget: MemoryBudget | undefined, name: string): BudgetFields {
  if (!budget) return {};
  const m = budget.status().models.find((x) => x.name === name);
  if (!m) return {};
  return {
    ...(m.resident ? { resident_bytes: Math.round(m.bytes), load_bytes: Math.round(m.loadBytes) } : {}),
    cold_loads: m.coldLoads,
    cold_load_ms_total: Math.round(m.coldLoadNsTotal / 1e6),
    last_cold_load_ms: Math.round(m.lastColdLoadNs / 1e6),
    cold_load_room_ms_total: Math.round(m.coldRoomNsTotal / 1e6),
    cold_load_backend_ms_total: Math.round(m.coldBackendNsTotal / 1e6),
    cold_load_warmup_ms_total: Math.round(m.coldWarmupNsTotal / 1e6),
    evictions_caused: m.evictionsCaused,
    evicted: m.evicted,
  };
}
