// Reads one model's configuration: config.pbtxt (or a load-time JSON
// override), then normalize-and-validate once (model-config-utils.ts), with
// the model file's own inputs and outputs for auto-complete and checks, read
// by the backend's hook (`readModelIO`, registered with the backend).
import fs from 'node:fs';
import path from 'node:path';
import { parseModelConfigText } from './model-config-parser.ts';
import { normalizeModelConfig } from './model-config-utils.ts';
import type { ModelConfig } from '../api/model-config.ts';
import { registeredBackend } from '../api/backend.ts';
import { usableGpuCount } from './gpu-info.ts';
import { messageType, TO_OBJECT } from '../../protocol/index.ts';
import { invalidArg } from '../api/status.ts';

export interface ConfigSource {
  modelName: string;
  modelDir: string;
  /** The repository root, so messages name `<model>/config.pbtxt`. */
  repository: string;
  strict: boolean;
  /** JSON override (Triton's load `config` parameter). */
  overrideJson?: string;
}

/** The config as written (parsed, not normalized). */
export function readRawConfig(src: ConfigSource): ModelConfig {
  const rel = path.relative(src.repository, path.join(src.modelDir, 'config.pbtxt'));
  if (src.overrideJson !== undefined) {
    let obj: unknown;
    try {
      obj = JSON.parse(src.overrideJson);
    } catch (err) {
      throw invalidArg(`load of '${src.modelName}': 'config' parameter is not valid JSON: ${(err as Error).message}`);
    }
    const T = messageType('inference.ModelConfig');
    // Enums arrive by name ("TYPE_FP32"), which verify() rejects: convert first, then verify the message.
    let msg: ReturnType<typeof T.fromObject>;
    try {
      msg = T.fromObject(obj as Record<string, unknown>);
    } catch (err) {
      throw invalidArg(`load of '${src.modelName}': 'config' parameter: ${(err as Error).message}`);
    }
    const bad = T.verify(msg);
    if (bad) throw invalidArg(`load of '${src.modelName}': 'config' parameter: ${bad}`);
    return T.toObject(msg, TO_OBJECT) as ModelConfig;
  }
  const file = path.join(src.modelDir, 'config.pbtxt');
  if (!fs.existsSync(file)) {
    if (src.strict) throw invalidArg(`${rel}: missing (required with --strict-model-config=true)`);
    // No backend named: loadModelConfig infers it from the version folder's model file.
    return { name: src.modelName, input: [], output: [] } as unknown as ModelConfig;
  }
  return parseModelConfigText(fs.readFileSync(file, 'utf8'), rel);
}

/** Which backend a raw config names (before defaults). */
export function backendNameOf(raw: ModelConfig): string {
  if (raw.platform === 'ensemble') return 'ensemble';
  if (raw.backend) return raw.backend;
  if (raw.platform === 'onnxruntime_onnx') return 'onnxruntime';
  return 'onnxruntime';
}

/** Model file -> backend, in the order Triton's auto-complete would find them. */
const MODEL_FILE_BACKENDS: Array<[string, string]> = [
  ['model.onnx', 'onnxruntime'],
  ['model.py', 'python'],
  ['model.js', 'js'],
  ['model.ts', 'js'],
  ['model.mjs', 'js'],
];

/** The backend a version folder's model file implies (config without backend/platform), or undefined. */
export function inferBackendFromFiles(versionDir: string, defaultFilename?: string): string | undefined {
  for (const [file, backend] of MODEL_FILE_BACKENDS) {
    if (fs.existsSync(path.join(versionDir, file))) return backend;
  }
  if (defaultFilename) {
    const ext = path.extname(defaultFilename);
    const hit = MODEL_FILE_BACKENDS.find(([f]) => path.extname(f) === ext);
    if (hit && fs.existsSync(path.join(versionDir, defaultFilename))) return hit[1];
  }
  return undefined;
}

/** The backend a raw config will get for this version folder (named, from platform, or inferred). */
export function effectiveBackendName(raw: ModelConfig, versionDir: string): string {
  if (raw.platform || raw.backend) return backendNameOf(raw);
  return inferBackendFromFiles(versionDir, raw.default_model_filename) ?? '';
}

/** The normalized config of one model version directory. */
export function loadModelConfig(src: ConfigSource, raw: ModelConfig, versionDir: string): ModelConfig {
  const rel = path.relative(src.repository, path.join(src.modelDir, 'config.pbtxt'));
  const inferredBackend = raw.platform || raw.backend ? undefined : inferBackendFromFiles(versionDir, raw.default_model_filename);
  const backend = registeredBackend(inferredBackend ?? backendNameOf(raw));
  let modelIO;
  if (backend?.readModelIO) {
    const names = raw.default_model_filename ? [raw.default_model_filename] : [backend.defaultModelFilename].flat();
    const f = names.map((n) => path.join(versionDir, n)).find((p) => fs.existsSync(p));
    if (f) modelIO = backend.readModelIO(f);
  }
  return normalizeModelConfig(structuredClone(raw), {
    modelName: src.modelName,
    file: rel,
    strict: src.strict,
    modelIO,
    gpuCount: usableGpuCount(),
    inferredBackend,
  });
}

/** Numeric version folders of a model, ascending. */
export function versionsOnDisk(modelDir: string): number[] {
  if (!fs.existsSync(modelDir)) return [];
  return fs
    .readdirSync(modelDir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && /^\d+$/.test(d.name))
    .map((d) => Number(d.name))
    .sort((a, b) => a - b);
}

/** Versions selected by version_policy (default latest 1). */
export function versionsToLoad(config: ModelConfig, onDisk: number[], rel: string): number[] {
  const p = config.version_policy;
  if (p?.all) return onDisk;
  if (p?.specific) {
    const want = p.specific.versions ?? [];
    const missing = want.filter((v) => !onDisk.includes(v));
    if (missing.length) throw invalidArg(`${rel}: version_policy.specific names version(s) ${missing.join(', ')} with no folder`);
    return want.slice().sort((a, b) => a - b);
  }
  const n = p?.latest?.num_versions ?? 1;
  return onDisk.slice(-Math.max(1, n));
}
