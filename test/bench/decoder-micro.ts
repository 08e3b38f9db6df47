// The receive-pool decoder inside grpc-js alone (no server, no model): CPU per
// 10 MiB message fed in 16 KiB chunks (h2load's DATA frame size; each chunk a
// fresh buffer, as socket reads are) through grpc-js's StreamDecoder, with the
// patch (`pooled`) or as grpc-js ships it (`plain`), the message then dropped
// (a stream request: never given back) or given back (`release`, as unary
// ModelInfer does). One variant per process; run them alternately:
//   node --import tsx test/bench/decoder-micro.ts pooled|plain [messages] [release]
import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { reachIntoGrpcJs } from '../../engine/frontends/grpc/grpc-js-internals.ts';
import { release } from '../../engine/frontends/grpc/receive-pool.ts';

const [variant = 'pooled', n = '200', mode = 'drop'] = process.argv.slice(2);
if (variant === 'pooled') {
  const server = new grpc.Server();
  await new Promise<void>((res, rej) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e) => (e ? rej(e) : res())),
  );
  if (!reachIntoGrpcJs(server, { widenHttp2: false, pooledDecoder: true })) throw new Error('not installed');
  server.forceShutdown();
}
const require = createRequire(import.meta.url);
const { StreamDecoder } = require(path.join(path.dirname(require.resolve('@grpc/grpc-js')), 'stream-decoder.js')) as {
  StreamDecoder: new (max: number) => { write(b: Buffer): Buffer[] };
};
const SIZE = 10 * 2 ** 20;
const CHUNK = 16 * 1024;
const run = (count: number) => {
  const d = new StreamDecoder(-1);
  for (let i = 0; i < count; i++) {
    const head = Buffer.alloc(5);
    head.writeUInt32BE(SIZE, 1);
    d.write(head);
    let got: Buffer[] = [];
    for (let o = 0; o < SIZE; o += CHUNK) got = d.write(Buffer.allocUnsafeSlow(CHUNK).fill(i & 0xff));
    if (got.length !== 1 || got[0]!.length !== SIZE + 5) throw new Error('bad message');
    if (mode === 'release') release(got[0]);
  }
};
run(20); // warm-up
const c0 = process.cpuUsage();
const f0 = process.resourceUsage().minorPageFault;
run(Number(n));
const c = process.cpuUsage(c0);
const faults = (process.resourceUsage().minorPageFault - f0) / Number(n);
console.log(
  `${variant} ${mode}: ${((c.user + c.system) / 1000 / Number(n)).toFixed(2)} ms CPU, ${faults.toFixed(0)} page faults per 10 MiB message`,
);
