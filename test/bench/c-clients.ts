// Load generators written in C, for the CPU-per-inference rows: `h2load`
// (Debian nghttp2-client) speaks unary gRPC as plain HTTP/2 POSTs of one
// prebuilt framed ModelInferRequest, `wrk` posts one prebuilt HTTP body. A
// client in C costs little CPU per request and none of it in Node, so the
// engine's own CPU per inference is what the row shows. Each helper returns
// undefined-free results or throws; callers skip rows when a binary is missing.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { messageType } from '../../protocol/index.ts';
import type { ModelInferRequest } from '../../client/grpc-client.ts';

/** Absolute path of a program on PATH, or undefined. */
export function which(program: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = path.join(dir, program);
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

/** Why a row loaded by h2load / wrk was not measured when the binary is not on PATH (the Debian package to install). */
export const H2LOAD_MISSING = 'h2load not installed (Debian nghttp2-client)';
export const WRK_MISSING = 'wrk not installed (Debian wrk)';

/** A temp dir for request bodies and scripts (pid in the name: other runs share /tmp). */
export function bodyDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), `bench-cpu-${process.pid}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A unary gRPC request body: the 5-byte frame header (uncompressed, length) + the serialized message. */
export function grpcFrame(req: ModelInferRequest): Buffer {
  const msg = messageType('inference.ModelInferRequest')
    .encode(req as never)
    .finish();
  const out = Buffer.allocUnsafe(5 + msg.byteLength);
  out[0] = 0;
  out.writeUInt32BE(msg.byteLength, 1);
  out.set(msg, 5);
  return out;
}

/** A KServe v2 HTTP body with the binary tensor extension: JSON header + raw bytes. */
export function httpBinaryBody(
  input: { name: string; datatype: string; shape: number[] },
  bytes: Buffer,
): { body: Buffer; headerLength: number } {
  const head = Buffer.from(
    JSON.stringify({
      inputs: [{ ...input, parameters: { binary_data_size: bytes.byteLength } }],
      parameters: { binary_data_output: true },
    }),
  );
  return { body: Buffer.concat([head, bytes]), headerLength: head.byteLength };
}

export interface CLoadResult {
  /** Requests answered 2xx (HTTP) / 200 (gRPC; grpc-status is checked through the engine's statistics). */
  ok: number;
  failed: number;
  seconds: number;
  /** 99th percentile latency (ms), where the client reports it (wrk). */
  p99Ms?: number;
}

function run(file: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${path.basename(file)} failed: ${err.message} ${stderr.slice(-300)}`)) : resolve(stdout),
    ),
  );
}

/** h2load: `clients` connections, one stream each, for `seconds`, POSTing `bodyFile` as unary gRPC. */
export async function h2loadGrpc(port: number, method: string, bodyFile: string, clients: number, seconds: number): Promise<CLoadResult> {
  const out = await run(
    which('h2load')!,
    [
      '-c',
      String(clients),
      '-m',
      '1',
      '-t',
      '1',
      '-D',
      String(seconds),
      '-d',
      bodyFile,
      '-H',
      'content-type: application/grpc',
      '-H',
      'te: trailers',
      `http://127.0.0.1:${port}/inference.GRPCInferenceService/${method}`,
    ],
    (seconds + 30) * 1000,
  );
  const m = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out);
  if (!m) throw new Error(`h2load: no summary in output: ${out.slice(-300)}`);
  return { ok: Number(m[4]), failed: Number(m[5]) + Number(m[6]), seconds };
}

/** wrk: `clients` keep-alive connections for `seconds`, POSTing the file `bodyFile` with `headers`. */
export async function wrkPost(
  port: number,
  urlPath: string,
  bodyFile: string,
  headers: Record<string, string>,
  clients: number,
  seconds: number,
  dir: string,
): Promise<CLoadResult> {
  const lua = path.join(dir, `wrk-${path.basename(bodyFile)}.lua`);
  const hdrs = Object.entries(headers)
    .map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)
    .join('\n');
  writeFileSync(
    lua,
    `local f = assert(io.open(${JSON.stringify(bodyFile)}, "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
${hdrs}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("CHECK ok=%d bad=%d p99us=%d\\n", summary.requests, e.status + e.connect + e.read + e.write + e.timeout, latency:percentile(99)))
end
`,
  );
  const out = await run(
    which('wrk')!,
    ['-t', '1', '-c', String(clients), '-d', `${seconds}s`, '-s', lua, `http://127.0.0.1:${port}${urlPath}`],
    (seconds + 30) * 1000,
  );
  const m = /CHECK ok=(\d+) bad=(\d+) p99us=(\d+)/.exec(out);
  if (!m) throw new Error(`wrk: no summary in output: ${out.slice(-300)}`);
  return { ok: Number(m[1]) - Number(m[2]), failed: Number(m[2]), seconds, p99Ms: Number(m[3]) / 1000 };
}
