// A load whose file overrides name a path component past NAME_MAX (255 bytes)
// answers as Triton does: INTERNAL "failed to load '<m>', failed to poll from
// model repository" (500 over HTTP, INTERNAL over gRPC), with none of the
// engine's temp paths in the text; the model already loaded keeps serving.
import { readdirSync } from 'node:fs';
import os from 'node:os';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { SIMPLE_CONFIG, buildSimple } from '../fixtures/test-models.ts';
import { grpcError, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const TEXT = "failed to load 'simple', failed to poll from model repository";
const long = 'a'.repeat(300);
const model = Buffer.from(buildSimple());
const tempDirs = () =>
  readdirSync(os.tmpdir())
    .filter((n) => n.startsWith('engine-load-'))
    .sort();

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('l0-load-name-max', ['simple']);
  engine = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', loadModels: ['simple'] });
  client = protoLoaderClient(engine.grpcPort);
});

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
});

describe('L0_load_name_max', () => {
  it("HTTP: a file name or a folder past NAME_MAX is 500 with Triton's text, no temp path, nothing left behind", async () => {
    const before = tempDirs();
    for (const key of [`file:1/${long}.onnx`, `file:${long}/model.onnx`]) {
      const r = await httpJson(engine.httpPort, 'POST', '/v2/repository/models/simple/load', {
        parameters: { config: SIMPLE_CONFIG, [key]: model.toString('base64') },
      });
      expect([r.status, r.json.error]).toEqual([500, TEXT]);
    }
    expect(tempDirs()).toEqual(before);
    expect((await httpJson(engine.httpPort, 'GET', '/v2/models/simple/ready')).status).toBe(200);
  });

  it('gRPC: INTERNAL with the same text', async () => {
    const e = await grpcError(
      client.call('RepositoryModelLoad', {
        model_name: 'simple',
        parameters: { config: { string_param: SIMPLE_CONFIG }, [`file:1/${long}.onnx`]: { bytes_param: model } },
      }),
    );
    expect([e.code, e.details]).toEqual([grpc.status.INTERNAL, TEXT]);
  });
});
