// The least a Node gateway can do per call, as a yardstick for the gateway's
// CPU per `/fn` call: a node:http server that, for each request, reads and
// discards the body, makes one unary ModelInfer call to the engine with
// @grpc/grpc-js (a prebuilt request, bytes passed through: no JSON, no
// protobuf, no auth, no metrics) and answers the response bytes. Whatever
// the real gateway does on top (routing, auth, JSON tensors, limits,
// metrics, tracing) is above this floor.
// Usage: node --import tsx test/bench/floor-gateway.ts <port> <engine target> <request file> [grpcjs|h2]
//   engine target: host:port or unix:/path (as the gateway's --engine)
//   grpcjs (default): the call is made with grpc-js's client; h2: with
//   node:http2 directly (one session, one stream per call)
// Prints "listening <port>" once it accepts connections.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';

const [portArg, target, requestFile, mode = 'grpcjs'] = process.argv.slice(2);
if (!portArg || !target || !requestFile) {
  console.error('usage: floor-gateway.ts <port> <engine target> <ModelInferRequest file (framed or bare)>');
  process.exit(2);
}
let request = readFileSync(requestFile);
// Accept a framed gRPC body (as h2load posts) as well as a bare message.
if (request.length >= 5 && request[0] === 0 && request.readUInt32BE(1) === request.length - 5) request = request.subarray(5);

const id = (b: Buffer) => b;
const METHOD = '/inference.GRPCInferenceService/ModelInfer';
type Call = (cb: (err: Error | null, reply?: Buffer) => void) => void;

function grpcJsCall(): Call {
  const client = new grpc.Client(target!, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  });
  return (cb) => client.makeUnaryRequest(METHOD, id, id, request, (err, reply) => cb(err, reply));
}

function h2Call(): Call {
  const framed = Buffer.alloc(5 + request.length);
  framed.writeUInt32BE(request.length, 1);
  request.copy(framed, 5);
  const session = target!.startsWith('unix:')
    ? http2.connect('http://localhost', { createConnection: () => net.connect(target!.slice(5)) })
    : http2.connect(`http://${target}`);
  const headers = { ':method': 'POST', ':path': METHOD, 'content-type': 'application/grpc', te: 'trailers' };
  return (cb) => {
    const s = session.request(headers);
    const parts: Buffer[] = [];
    let status = '';
    s.on('data', (d: Buffer) => parts.push(d));
    s.on('trailers', (t) => (status = String(t['grpc-status'])));
    s.on('response', (h) => h['grpc-status'] !== undefined && (status = String(h['grpc-status'])));
    s.on('error', (e) => cb(e));
    s.on('end', () => (status === '0' ? cb(null, Buffer.concat(parts).subarray(5)) : cb(new Error(`grpc-status ${status}`))));
    s.end(framed);
  };
}

const call = mode === 'h2' ? h2Call() : grpcJsCall();

const server = http.createServer((req, res) => {
  req.on('data', () => undefined);
  req.on('end', () => {
    call((err, reply) => {
      if (err || !reply) {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(err?.message ?? 'no reply');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': reply.length });
      res.end(reply);
    });
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(portArg), '127.0.0.1', () => console.log(`listening ${portArg}`));
