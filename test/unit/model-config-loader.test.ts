// Triton's auto-complete of the backend: a config without backend/platform
// (or no config.pbtxt at all) gets it from the model file in the version folder.
// The model file's tensors come from the backend's own hook (`readModelIO`):
// the loader asks the registry, so the backends are registered here as the
// engine registers them (InferenceServer's constructor).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { effectiveBackendName, inferBackendFromFiles, loadModelConfig, readRawConfig } from '../../engine/config/model-config-loader.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import { registerBackend, type IOInfo } from '../../engine/api/backend.ts';
import { registerBuiltinBackends } from '../../engine/backends/index.ts';
import { buildSimpleFp32Batch } from '../fixtures/test-models.ts';

const root = mkdtempSync(path.join(os.tmpdir(), `cfg-loader-${process.pid}-`));
afterAll(() => rmSync(root, { recursive: true, force: true }));
registerBuiltinBackends();

function versionDir(model: string, files: Record<string, string | Uint8Array>): string {
  const dir = path.join(root, model, '1');
  mkdirSync(dir, { recursive: true });
  for (const [f, d] of Object.entries(files)) writeFileSync(path.join(dir, f), d);
  return dir;
}

describe('inferBackendFromFiles', () => {
  it('maps model.onnx, model.py, model.js and model.ts to their backends', () => {
    expect(inferBackendFromFiles(versionDir('a', { 'model.onnx': 'x' }))).toBe('onnxruntime');
    expect(inferBackendFromFiles(versionDir('b', { 'model.py': 'x' }))).toBe('python');
    expect(inferBackendFromFiles(versionDir('c', { 'model.js': 'x' }))).toBe('js');
    expect(inferBackendFromFiles(versionDir('d', { 'model.ts': 'x' }))).toBe('js');
    expect(inferBackendFromFiles(versionDir('e', { 'weights.bin': 'x' }))).toBeUndefined();
    expect(inferBackendFromFiles(versionDir('f', { 'custom.ts': 'x' }), 'custom.ts')).toBe('js');
  });

  it('leaves a named backend alone', () => {
    const dir = versionDir('g', { 'model.onnx': 'x' });
    expect(effectiveBackendName({ backend: 'js' } as ModelConfig, dir)).toBe('js');
    expect(effectiveBackendName({} as ModelConfig, dir)).toBe('onnxruntime');
  });

  it('completes a `config` override like {"max_batch_size": 16} from model.onnx', () => {
    const dir = versionDir('simple', { 'model.onnx': buildSimpleFp32Batch() });
    const src = {
      modelName: 'simple',
      modelDir: path.dirname(dir),
      repository: root,
      strict: false,
      overrideJson: '{"max_batch_size": 16}',
    };
    const c = loadModelConfig(src, readRawConfig(src), dir);
    expect([c.backend, c.platform, c.max_batch_size, c.input.length]).toEqual(['onnxruntime', 'onnxruntime_onnx', 16, 1]);
  });

  it('loads a js model with no config.pbtxt as js', () => {
    const dir = versionDir('nocfg', { 'model.ts': 'export function execute() { return []; }' });
    const src = { modelName: 'nocfg', modelDir: path.dirname(dir), repository: root, strict: false };
    expect(loadModelConfig(src, readRawConfig(src), dir).backend).toBe('js');
  });
});

describe('the backend hook for the model file (readModelIO)', () => {
  const read: string[] = [];
  const io = {
    inputs: [{ name: 'X', datatype: 'FP32', shape: [2] }] as IOInfo[],
    outputs: [{ name: 'Y', datatype: 'FP32', shape: [2] }] as IOInfo[],
  };
  registerBackend({
    name: 'probe_io',
    defaultModelFilename: ['model.probe', 'model.alt'],
    load: () => Promise.reject(new Error('not loaded in this test')),
    readModelIO: (file) => (read.push(file), io),
  });
  const src = (model: string) => ({ modelName: model, modelDir: path.join(root, model), repository: root, strict: true });

  it('is called with the first default model file present, and the config is checked against what it read', () => {
    const dir = versionDir('probe', { 'model.alt': 'x' });
    const cfg = (t: string) =>
      ({
        name: 'probe',
        backend: 'probe_io',
        input: [{ name: t, data_type: 'TYPE_FP32', dims: [2] }],
        output: [],
      }) as unknown as ModelConfig;
    expect(loadModelConfig(src('probe'), cfg('X'), dir).input[0]!.name).toBe('X');
    expect(read).toEqual([path.join(dir, 'model.alt')]);
    expect(() => loadModelConfig(src('probe'), cfg('Z'), dir)).toThrow("'Z' is not an input of the model file (it has: X)");
  });

  it('is not called when no model file is there', () => {
    read.length = 0;
    const dir = versionDir('probe_none', { 'weights.bin': 'x' });
    const c = { name: 'probe_none', backend: 'probe_io', input: [], output: [] } as unknown as ModelConfig;
    expect(loadModelConfig(src('probe_none'), c, dir).backend).toBe('probe_io');
    expect(read).toEqual([]);
  });
});
