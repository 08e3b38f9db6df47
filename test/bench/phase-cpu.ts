// Phase: the engine's CPU per inference by path — tensor bytes inline over
// gRPC, inline over HTTP (binary extension), inputs in client shm, the tiny
// recommender over both, and one 10 MiB FP32 input inline (gRPC, HTTP) — with load from C
// clients (h2load, wrk; see c-clients.ts) so no Node client competes for the
// engine's cores. CPU is the engine process's utime+stime (all threads) over
// the row, divided by the requests its statistics counted as successful: both
// robust to other load on the host, unlike throughput. A row whose client
// binary is missing is skipped with the reason. Then the floors
// (cpu-floors.ts): the same clients and bodies against a Node server that
// does nothing, the yardstick each engine figure is read against.
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TritonGrpcClient, type ModelInferRequest } from '../../client/grpc-client.ts';
import { createSharedMemoryRegion, destroySharedMemoryRegion } from '../../client/shared-memory.ts';
import {
  bodyDir,
  grpcFrame,
  H2LOAD_MISSING,
  h2loadGrpc,
  httpBinaryBody,
  which,
  WRK_MISSING,
  wrkPost,
  type CLoadResult,
} from './c-clients.ts';
import { fp32Bytes } from './calls.ts';
import type { BenchContext } from './context.ts';
import { gatewayCpuPhase } from './cpu-gateway.ts';
import { floorsPhase, type FloorBodies, type HttpBodyFile, type PathBodies } from './cpu-floors.ts';
import { cpuRow } from './cpu-row.ts';
import type { CpuRow } from './report-cpu.ts';
import { BUNDLED_REPO, startEngineProc, type EngineProc } from './services.ts';
import { writeSumVector } from './shm-vs-inline.ts';

/** Concurrency of every CPU row (the figures are at 16 clients). */
export const CPU_CLIENTS = 16;
const ENC = { model: 'clip_encoder_model', input: 'pixel_values', shape: [1, 3, 224, 224] };
const REC = { model: 'product_recommender_model', input: 'user_features', shape: [1, 64] };
const BIG_BYTES = 10 * 2 ** 20;
const BIG = { model: 'sum_vector', input: 'x', shape: [BIG_BYTES / 4] };
type TensorPath = typeof ENC;

/** The encoder, the recommender (as bundled: dynamic batching) and sum_vector, in a temp repository. */
function cpuRepository(dir: string): string {
  const repo = path.join(dir, 'repo');
  mkdirSync(repo);
  for (const m of [ENC.model, REC.model]) cpSync(path.join(BUNDLED_REPO, m), path.join(repo, m), { recursive: true });
  writeSumVector(repo);
  return repo;
}

async function successCount(engine: EngineProc, model: string): Promise<number> {
  const s = (await engine.client.modelStatistics(model)).model_stats[0] as { inference_stats?: { success?: { count?: number } } };
  return Number(s?.inference_stats?.success?.count ?? 0);
}

/** One FP32 input of `bytes` for `m`, inline, written as a framed gRPC body and a binary-extension HTTP body under `dir`. */
function writeBodies(dir: string, key: string, m: TensorPath, bytes: Buffer): PathBodies {
  const grpc = path.join(dir, `${key}.grpc`);
  writeFileSync(
    grpc,
    grpcFrame({ model_name: m.model, inputs: [{ name: m.input, datatype: 'FP32', shape: m.shape }], raw_input_contents: [bytes] }),
  );
  const b = httpBinaryBody({ name: m.input, datatype: 'FP32', shape: m.shape }, bytes);
  const http = path.join(dir, `${key}.http`);
  writeFileSync(http, b.body);
  return { grpc, http: { file: http, headerLength: b.headerLength }, urlPath: `/v2/models/${m.model}/infer` };
}

/** One client calling `call` back to back for `seconds` (a Node client: its CPU is not the engine's). */
async function sequentialCalls(call: () => Promise<unknown>, seconds: number): Promise<CLoadResult> {
  const end = performance.now() + seconds * 1000;
  let ok = 0;
  let failed = 0;
  while (performance.now() < end)
    await call().then(
      () => ok++,
      () => failed++,
    );
  return { ok, failed, seconds };
}

/** Median ms to copy `bytes` of warm memory once (the 10 MiB row's yardstick), in this process. */
export function copyMs(bytes: number): number {
  const a = Buffer.alloc(bytes, 1);
  const b = Buffer.alloc(bytes);
  const t: number[] = [];
  for (let i = 0; i < 30; i++) {
    const t0 = performance.now();
    a.copy(b);
    t.push(performance.now() - t0);
  }
  return t.sort((x, y) => x - y)[15]!;
}

export async function cpuPhase(ctx: BenchContext): Promise<void> {
  ctx.log(`CPU per inference (C clients, ${CPU_CLIENTS} connections)`);
  const h2 = which('h2load');
  const wrk = which('wrk');
  const secs = ctx.quick ? 1 : 4;
  const tmp = bodyDir();
  let engine: EngineProc | undefined;
  const shmName = `bench_cpu_${process.pid}`;
  let region: ReturnType<typeof createSharedMemoryRegion> | undefined;
  let bigRegion: ReturnType<typeof createSharedMemoryRegion> | undefined;
  const skip = (id: string, label: string, why: string) => ctx.cpu.push({ id, label, skipped: why });
  try {
    const repo = cpuRepository(tmp.dir);
    // Its local channel carries the gateway row that uses it (cpu-gateway.ts); the engine removes the socket when it stops.
    const localSocket = path.join(os.tmpdir(), `bench-${process.pid}-cpu-local.sock`);
    engine = await startEngineProc('engine-cpu', repo, [`--local-socket=${localSocket}`]);
    const e = engine;
    const file = (name: string, data: Buffer) => {
      const p = path.join(tmp.dir, name);
      writeFileSync(p, data);
      return p;
    };
    const encBytes = fp32Bytes(3 * 224 * 224);
    const bigBytes = fp32Bytes(BIG_BYTES / 4);
    // The inline bodies, shared with the floors below.
    const bodies: FloorBodies = {
      enc: writeBodies(tmp.dir, 'enc', ENC, encBytes),
      rec: writeBodies(tmp.dir, 'rec', REC, fp32Bytes(64)),
      big: writeBodies(tmp.dir, 'big', BIG, bigBytes),
    };
    const push = (r: CpuRow) => ctx.cpu.push(r);
    const row = (id: string, label: string, model: string, load: () => Promise<CLoadResult>) =>
      cpuRow(ctx, e.child.proc.pid!, id, label, load, () => successCount(e, model)).then(push);
    const grpcRow = (id: string, label: string, model: string, body: string, clients = CPU_CLIENTS) =>
      h2 ? row(id, label, model, () => h2loadGrpc(e.grpcPort, 'ModelInfer', body, clients, secs)) : skip(id, label, H2LOAD_MISSING);
    const httpRow = (id: string, label: string, model: string, b: HttpBodyFile, clients = CPU_CLIENTS) =>
      wrk
        ? row(id, label, model, () =>
            wrkPost(
              e.httpPort,
              `/v2/models/${model}/infer`,
              b.file,
              { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(b.headerLength) },
              clients,
              secs,
              tmp.dir,
            ),
          )
        : skip(id, label, WRK_MISSING);

    // Encoder: 588 KiB FP32 per request, inline (gRPC, HTTP) and in shm.
    await grpcRow('cpu-enc-grpc', 'clip_encoder_model, 588 KiB FP32 inline over gRPC', ENC.model, bodies.enc.grpc);
    await httpRow('cpu-enc-http', 'clip_encoder_model, 588 KiB FP32 inline over HTTP (binary extension)', ENC.model, bodies.enc.http);
    region = createSharedMemoryRegion(shmName, `/${shmName}`, encBytes.byteLength, { touch: true, exclusive: true });
    region.bytes.set(encBytes);
    await e.client.systemSharedMemoryRegister(shmName, region.key, region.byteSize);
    const shmReq = grpcFrame({
      model_name: ENC.model,
      inputs: [
        {
          name: ENC.input,
          datatype: 'FP32',
          shape: ENC.shape,
          parameters: { shared_memory_region: { string_param: shmName }, shared_memory_byte_size: { int64_param: encBytes.byteLength } },
        },
      ],
    });
    await grpcRow('cpu-enc-shm', 'clip_encoder_model, inputs in client shm over gRPC', ENC.model, file('enc-shm.grpc', shmReq));
    // Tiny model: per-request overhead dominates.
    await grpcRow('cpu-rec-grpc', 'product_recommender_model (256 B in), dynamic batching, over gRPC', REC.model, bodies.rec.grpc);
    await httpRow(
      'cpu-rec-http',
      'product_recommender_model (256 B in), dynamic batching, over HTTP (binary extension)',
      REC.model,
      bodies.rec.http,
    );
    // One 10 MiB FP32 input inline, 1 client, beside the time to copy 10 MiB once.
    await grpcRow('cpu-big-grpc', 'sum_vector, 10 MiB FP32 inline over gRPC, 1 client', BIG.model, bodies.big.grpc, 1);
    // The same from a grpc-js client: Node's HTTP/2 sends DATA frames up to the
    // server's SETTINGS_MAX_FRAME_SIZE and follows its windows (h2load keeps
    // 16 KiB frames), so this row shows what the engine's larger frames and
    // windows (net/h2/http2-settings.ts) buy a Node client.
    const bigReq: ModelInferRequest = {
      model_name: BIG.model,
      inputs: [{ name: BIG.input, datatype: 'FP32', shape: BIG.shape }],
      raw_input_contents: [bigBytes],
    };
    const gc = new TritonGrpcClient(`127.0.0.1:${e.grpcPort}`);
    try {
      await row('cpu-big-grpcjs', 'sum_vector, 10 MiB FP32 inline over gRPC from grpc-js (Node client), 1 client', BIG.model, () =>
        sequentialCalls(() => gc.modelInfer(bigReq), secs),
      );
    } finally {
      gc.close();
    }
    // And over HTTP/1 (wrk, one connection), beside node:http's floor for the same body.
    await httpRow('cpu-big-http', 'sum_vector, 10 MiB FP32 inline over HTTP (binary extension), 1 client', BIG.model, bodies.big.http, 1);
    // The same input from shm: what the model itself costs (ReduceSum reads all 10 MiB).
    bigRegion = createSharedMemoryRegion(`${shmName}_big`, `/${shmName}_big`, BIG_BYTES, { touch: true, exclusive: true });
    bigRegion.bytes.set(bigBytes);
    await e.client.systemSharedMemoryRegister(`${shmName}_big`, bigRegion.key, bigRegion.byteSize);
    const bigShm = grpcFrame({
      model_name: BIG.model,
      inputs: [
        {
          name: BIG.input,
          datatype: 'FP32',
          shape: BIG.shape,
          parameters: { shared_memory_region: { string_param: `${shmName}_big` }, shared_memory_byte_size: { int64_param: BIG_BYTES } },
        },
      ],
    });
    await grpcRow('cpu-big-shm', 'sum_vector, 10 MiB FP32 in client shm over gRPC, 1 client', BIG.model, file('big-shm.grpc', bigShm), 1);
    ctx.values.set('copy-10mib-ms', copyMs(BIG_BYTES));
    // The engine is idle from here; it stops after the floors (the shm regions stay registered till then).
    await floorsPhase(ctx, bodies, CPU_CLIENTS, secs, tmp.dir);
    await gatewayCpuPhase(ctx, e, localSocket, bodies.rec.grpc, CPU_CLIENTS, secs, tmp.dir);
    await engine.stop(); // its shm regions are destroyed in the finally below
    engine = undefined;
    // (The rows cpu-rec-grpc-grpcjs and cpu-enc-grpc-grpcjs, an engine with grpc-js serving every ModelInfer,
    // were removed in issue 38 with the switch ENGINE_GRPC_DIRECT_INFER they needed: docs/architecture.md#doors-into-the-engine.)
  } catch (err) {
    ctx.log(`  CPU phase failed: ${(err as Error).message}`);
    ctx.notes.push(`CPU per inference not measured: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    if (region) {
      await engine?.client.systemSharedMemoryUnregister(shmName).catch(() => undefined);
      destroySharedMemoryRegion(region);
    }
    if (bigRegion) {
      await engine?.client.systemSharedMemoryUnregister(`${shmName}_big`).catch(() => undefined);
      destroySharedMemoryRegion(bigRegion);
    }
    await engine?.stop();
    tmp.remove();
  }
}
