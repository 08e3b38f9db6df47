// Each model's cold loads and evictions under the engine's memory budget, read
// from the engine's HTTP repository index (POST /v2/repository/index): the
// gRPC index (Triton's proto) has no such fields and ModelStatistics no honest
// place for them. Only our engine fills them (with --model-memory-budget);
// against a plain Triton the fields are absent and the figures null.
// A restricted engine gets the GATEWAY_ENGINE_KEY pairs as HTTP headers (the
// form of Triton's --http-restricted-api; engine-client.ts passes them in).

/** One model version's budget figures (null: the engine did not report it). */
export interface ModelLoads {
  name: string;
  version: string;
  coldLoads: number | null;
  lastColdLoadMs: number | null;
  evictions: number | null;
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** The engine's HTTP index at `address` (host:port or a URL), as ModelLoads rows. */
export async function fetchModelLoads(address: string, headers: Record<string, string>, timeoutMs: number): Promise<ModelLoads[]> {
  const base = /^https?:\/\//.test(address) ? address.replace(/\/+$/, '') : `http://${address}`;
  const res = await fetch(`${base}/v2/repository/index`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: '{}',
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (!res.ok) throw new Error(`engine HTTP index at ${base}: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
  const rows = (await res.json()) as unknown;
  if (!Array.isArray(rows)) throw new Error(`engine HTTP index at ${base}: expected a JSON array`);
  return rows.map((r: Record<string, unknown>) => ({
    name: String(r.name),
    version: String(r.version ?? ''),
    coldLoads: num(r.cold_loads),
    lastColdLoadMs: num(r.last_cold_load_ms),
    evictions: num(r.evicted),
  }));
}
