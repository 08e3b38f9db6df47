// Floors of section 6: the same C clients and the same request bodies as the
// engine's CPU rows, against floor-server.ts, a Node server that reads each
// body, discards it and answers a fixed reply (node:http2 answering like
// unary gRPC, the engine's own HTTP/2 server answering the same way (what
// its gRPC port runs on), @grpc/grpc-js with a pass-through handler,
// node:http). A floor
// is the least CPU per request Node itself spends on that protocol, body and
// client: the part of an engine figure at or under it is not the engine's.
// A floor server keeps no statistics, so requests are counted by the client
// (h2load: HTTP 2xx; wrk: 2xx); a gRPC floor is first probed once with the
// row's body to check it answers grpc-status 0, which h2load does not read.
import { readFileSync } from 'node:fs';
import { ENGINE_NODE_FLAGS } from '../../engine/node-flags.ts';
import * as grpc from '@grpc/grpc-js';
import { H2LOAD_MISSING, h2loadGrpc, which, WRK_MISSING, wrkPost } from './c-clients.ts';
import type { BenchContext } from './context.ts';
import { cpuRow } from './cpu-row.ts';
import { freePort, spawnTs, stopChild, waitUntil, type Child } from './processes.ts';
import { FLOOR_NAME } from './report-cpu.ts';

/** A KServe v2 binary-extension HTTP body on disk and its JSON header's length. */
export interface HttpBodyFile {
  file: string;
  headerLength: number;
}

/** One request body of the engine rows, on disk, by protocol. */
export interface PathBodies {
  grpc: string;
  http: HttpBodyFile;
  /** Its URL path on the engine (the floor ignores it). */
  urlPath: string;
}

/** The bodies the floors are measured with, keyed like the engine rows' ids (cpu-<key>-grpc / -http). */
export interface FloorBodies {
  rec: PathBodies;
  enc: PathBodies;
  big: PathBodies;
}

type Mode = keyof typeof FLOOR_NAME;
const BODY_NAME: Record<keyof FloorBodies, string> = {
  rec: "the recommender's body (256 B tensor)",
  enc: "the encoder's body (588 KiB tensor)",
  big: 'the 10 MiB body',
};
const METHOD = '/inference.GRPCInferenceService/ModelInfer';

/** Start floor-server.ts in `mode` on a free port; resolves once it prints "listening". */
async function startFloor(mode: Mode): Promise<{ child: Child; port: number }> {
  const port = await freePort();
  // With the engine's Node flags: the floor stands in for the engine process.
  const child = spawnTs(`floor-${mode}`, 'test/bench/floor-server.ts', [mode, String(port)], {}, ENGINE_NODE_FLAGS);
  await waitUntil(child, async () => child.tail().includes(`listening ${port}`), 30_000).catch(async (e) => {
    await stopChild(child);
    throw e;
  });
  return { child, port };
}

/** One unary call with the message inside a framed gRPC body; rejects unless grpc-status is 0. */
async function grpcProbe(port: number, bodyFile: string): Promise<void> {
  const id = (b: Buffer) => b;
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': -1,
    'grpc.max_receive_message_length': -1,
  });
  try {
    await new Promise<void>((resolve, reject) =>
      client.makeUnaryRequest(METHOD, id, id, readFileSync(bodyFile).subarray(5), { deadline: Date.now() + 30_000 }, (err) =>
        err ? reject(new Error(`probe: ${err.message}`)) : resolve(),
      ),
    );
  } finally {
    client.close();
  }
}

/**
 * Measure every floor into ctx.floors: per mode, one server, then its rows
 * (the tiny body at `clients` connections, the encoder's at `clients`, the
 * 10 MiB one at 1), the same loads as the engine rows. Ids are
 * floor-<key>-<grpc|http>-<mode>, beside the engine's cpu-<key>-<grpc|http>.
 */
export async function floorsPhase(ctx: BenchContext, bodies: FloorBodies, clients: number, secs: number, dir: string): Promise<void> {
  ctx.log('  floors: the same clients against a Node server that does nothing');
  const h2 = which('h2load');
  const wrk = which('wrk');
  const keys: Array<[keyof FloorBodies, number]> = [
    ['rec', clients],
    ['enc', clients],
    ['big', 1],
  ];
  for (const mode of ['h2', 'h2own', 'grpcjs', 'http1'] as const) {
    const proto = mode === 'http1' ? 'http' : 'grpc';
    const rows = keys.map(([key, n]) => ({
      key,
      n,
      id: `floor-${key}-${proto}-${mode}`,
      label: `${FLOOR_NAME[mode]}: ${BODY_NAME[key]} over ${proto === 'grpc' ? 'gRPC, h2load' : 'HTTP, wrk'}, ${n} client${n === 1 ? '' : 's'}`,
    }));
    const missing = proto === 'grpc' ? (h2 ? undefined : H2LOAD_MISSING) : wrk ? undefined : WRK_MISSING;
    if (missing) {
      for (const r of rows) ctx.floors.push({ id: r.id, label: r.label, skipped: missing });
      continue;
    }
    let floor: { child: Child; port: number } | undefined;
    try {
      floor = await startFloor(mode);
      const { child, port } = floor;
      for (const r of rows) {
        const b = bodies[r.key];
        const load =
          proto === 'grpc'
            ? () => h2loadGrpc(port, 'ModelInfer', b.grpc, r.n, secs)
            : () =>
                wrkPost(
                  port,
                  b.urlPath,
                  b.http.file,
                  { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(b.http.headerLength) },
                  r.n,
                  secs,
                  dir,
                );
        const bad =
          proto === 'grpc'
            ? await grpcProbe(port, b.grpc).then(
                () => undefined,
                (e: Error) => e.message,
              )
            : undefined;
        ctx.floors.push(bad ? { id: r.id, label: r.label, skipped: bad } : await cpuRow(ctx, child.proc.pid!, r.id, r.label, load));
      }
    } catch (e) {
      const why = `${FLOOR_NAME[mode]} floor did not start: ${(e as Error).message.split('\n')[0]}`;
      ctx.log(`  ${why}`);
      for (const r of rows) if (!ctx.floors.some((f) => f.id === r.id)) ctx.floors.push({ id: r.id, label: r.label, skipped: why });
    } finally {
      if (floor) await stopChild(floor.child);
    }
  }
}
