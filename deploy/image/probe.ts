// What the image check asks of a running container, from inside its network
// namespace (`ip netns exec <ns> node --import tsx deploy/image/probe.ts ...`):
// the engine ready, every bundled model ready, one inference over HTTP, the
// metrics counting it, gRPC answering ServerReady; with --gateway, the
// gateway ready and a function call through it. Prints one JSON line; exits
// 1 naming the first check that failed. Self-contained (plain fetch and
// node:http2) so it needs nothing from the image or the project.
import http2 from 'node:http2';
import os from 'node:os';

const arg = (name: string, dflt?: string): string => {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (hit) return hit.slice(name.length + 3);
  if (dflt === undefined) throw new Error(`probe: --${name}= is required`);
  return dflt;
};

const since = Number(arg('since'));
const http = `http://127.0.0.1:${arg('http')}`;
const grpcPort = Number(arg('grpc'));
const metrics = `http://127.0.0.1:${arg('metrics')}/metrics`;
const models = arg('models').split(',').filter(Boolean);
const gateway = arg('gateway', '');
const apiKey = arg('api-key', '');
// The deadline: --budget-s seconds times the host's load per core (at least 1), re-read at every
// poll, so a loaded host gets the time it needs and a quiet one fails as soon as a fixed budget would.
const budgetMs = Number(arg('budget-s', '300')) * 1000;
const started = Date.now();
const pastDeadline = () => Date.now() - started > budgetMs * Math.max(1, os.loadavg()[0]! / os.availableParallelism());

const fail = (what: string): never => {
  process.stderr.write(`probe: ${what}\n`);
  process.exit(1);
};

async function waitFor(url: string): Promise<number> {
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return (Date.now() - since) / 1000;
    } catch {
      // not listening yet
    }
    if (pastDeadline()) fail(`${url} not 200 within ${budgetMs / 1000} s x the host's load per core`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A unary gRPC call with an empty request message; resolves to the response message bytes. */
function grpcEmptyCall(port: number, method: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const client = http2.connect(`http://127.0.0.1:${port}`);
    client.on('error', reject);
    const req = client.request({ ':method': 'POST', ':path': method, 'content-type': 'application/grpc', te: 'trailers' });
    const chunks: Buffer[] = [];
    let status: string | undefined;
    req.on('response', (h) => (status = h['grpc-status'] as string | undefined));
    req.on('trailers', (t) => (status = (t['grpc-status'] as string | undefined) ?? status));
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      client.close();
      const body = Buffer.concat(chunks);
      status === '0' ? resolve(body.subarray(5)) : reject(new Error(`${method}: grpc-status ${status}`));
    });
    req.end(Buffer.alloc(5)); // uncompressed, zero-length message
  });
}

const features = Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.1 + 1));
const result: Record<string, unknown> = {};

result.engine_ready_s = await waitFor(`${http}/v2/health/ready`);
const notReady: string[] = [];
for (const m of models) if ((await fetch(`${http}/v2/models/${m}/ready`)).status !== 200) notReady.push(m);
if (notReady.length) fail(`models not ready: ${notReady.join(', ')}`);
result.models_ready = models.length;

const infer = await fetch(`${http}/v2/models/product_recommender_model/infer`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ inputs: [{ name: 'user_features', shape: [1, 64], datatype: 'FP32', data: features }] }),
});
const out = (await infer.json()) as { outputs?: Array<{ name: string; shape: number[]; data: number[] }> };
const scores = out.outputs?.find((o) => o.name === 'scores');
if (infer.status !== 200 || scores?.data.length !== 100 || !scores.data.every((x) => x > 0 && x < 1))
  fail(`inference: HTTP ${infer.status} ${JSON.stringify(out).slice(0, 200)}`);
result.inference = 'product_recommender_model: 100 scores in (0, 1)';

const text = await (await fetch(metrics)).text();
const count = /nv_inference_request_success\{[^}]*model="product_recommender_model"[^}]*\}\s+(\d+)/.exec(text)?.[1];
if (!count || Number(count) < 1) fail('metrics: nv_inference_request_success for product_recommender_model missing or 0');
result.metrics_request_success = Number(count);

const ready = await grpcEmptyCall(grpcPort, '/inference.GRPCInferenceService/ServerReady');
if (!ready.equals(Buffer.from([0x08, 0x01]))) fail(`gRPC ServerReady answered ${ready.toString('hex')}, not ready=true`);
result.grpc_server_ready = true;

if (gateway) {
  const gw = `http://127.0.0.1:${gateway}`;
  result.gateway_ready_s = await waitFor(`${gw}/readyz`);
  const r = await fetch(`${gw}/fn/product_recommender`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ inputs: { user_features: { data: features, shape: [1, 64] } } }),
  });
  const body = (await r.json()) as { outputs?: Record<string, { data: number[] }> };
  if (r.status !== 200 || body.outputs?.scores?.data.length !== 100)
    fail(`gateway /fn/product_recommender: HTTP ${r.status} ${JSON.stringify(body).slice(0, 200)}`);
  result.gateway_call = '/fn/product_recommender: 100 scores';
}
process.stdout.write(`${JSON.stringify(result)}\n`);
