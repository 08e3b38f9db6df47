// The least a Node server can do per request on each protocol the engine
// speaks, as a yardstick for the engine's CPU per inference (bench section 6,
// "floors"): it reads the whole request body and discards it, and answers a
// fixed small reply. Modes:
//   h2     node:http2 alone, answering like a unary gRPC call (headers, one
//          length-prefixed message, trailers with grpc-status 0)
//   h2own  the same answer from the engine's own HTTP/2 server
//          (net/h2/h2-connection.ts), as the engine's gRPC port now runs
//   grpcjs @grpc/grpc-js's server with a pass-through (no protobuf) handler
//          for ModelInfer on the same path
//   http1  node:http, a 200 with a small JSON body
// Usage: node --import tsx test/bench/floor-server.ts <mode> <port>
// Prints "listening <port>" once it accepts connections.
import http from 'node:http';
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { CONNECTION_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW } from '../../net/h2/http2-settings.ts';
import { reachIntoGrpcJs } from '../../engine/frontends/grpc/grpc-js-internals.ts';
import net from 'node:net';
import { H2ServerConnection } from '../../net/h2/h2-connection.ts';
import { encodeHeaderBlock } from '../../net/h2/h2-frames.ts';

const [mode, portArg] = process.argv.slice(2);
const port = Number(portArg);
const METHOD = '/inference.GRPCInferenceService/ModelInfer';
// A small serialized ModelInferResponse-sized payload (bytes do not matter to the clients).
const reply = Buffer.alloc(48, 7);
const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, reply.byteLength]), reply]);

function h2(): void {
  // The engine's HTTP/2 settings (net/h2/http2-settings.ts), so only the server code differs.
  const server = http2.createServer({ settings: { maxFrameSize: MAX_FRAME_SIZE, initialWindowSize: STREAM_WINDOW } });
  server.on('session', (session) => session.setLocalWindowSize(CONNECTION_WINDOW));
  server.on('stream', (stream) => {
    stream.on('error', () => undefined); // a client reset at the end of a run
    stream.on('data', () => undefined);
    stream.on('end', () => {
      if (stream.destroyed) return;
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(framed);
    });
  });
  server.listen(port, '127.0.0.1', () => console.log(`listening ${port}`));
}

function h2own(): void {
  const settings = { maxFrameSize: MAX_FRAME_SIZE, streamWindow: STREAM_WINDOW, connectionWindow: CONNECTION_WINDOW };
  const headers = encodeHeaderBlock([
    [':status', '200'],
    ['content-type', 'application/grpc'],
  ]);
  const trailers = encodeHeaderBlock([['grpc-status', '0']]);
  const server = net.createServer((sock) => {
    new H2ServerConnection(sock, settings, (stream) => {
      stream.onEnd = () => {
        stream.respond(headers);
        stream.write(framed);
        stream.end(trailers);
      };
    });
  });
  server.listen(port, '127.0.0.1', () => console.log(`listening ${port}`));
}

function grpcjs(): void {
  const id = (b: Buffer) => b;
  const service: grpc.ServiceDefinition = {
    ModelInfer: {
      path: METHOD,
      requestStream: false,
      responseStream: false,
      requestSerialize: id,
      requestDeserialize: id,
      responseSerialize: id,
      responseDeserialize: id,
    },
  };
  const server = new grpc.Server({ 'grpc.max_receive_message_length': -1, 'grpc.enable_channelz': 0 });
  server.addService(service, { ModelInfer: (_call: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, reply) });
  server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) throw err;
    reachIntoGrpcJs(server, { widenHttp2: true, pooledDecoder: false }); // the engine's frames and windows, nothing else
    console.log(`listening ${port}`);
  });
}

function http1(): void {
  const body = JSON.stringify({ model_name: 'm', outputs: [] });
  const server = http.createServer((req, res) => {
    req.on('data', () => undefined);
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, '127.0.0.1', () => console.log(`listening ${port}`));
}

if (mode === 'h2') h2();
else if (mode === 'h2own') h2own();
else if (mode === 'grpcjs') grpcjs();
else if (mode === 'http1') http1();
else {
  console.error(`floor-server: unknown mode ${mode} (h2 | h2own | grpcjs | http1)`);
  process.exit(2);
}
