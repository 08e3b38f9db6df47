import { describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resolveInterpreter } from '../../engine/backends/python/interpreter.ts';
import { parseBackendConfig } from '../../engine/server/cli-options.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

const cfg = (envPath?: string): ModelConfig =>
  ({
    name: 'm',
    max_batch_size: 0,
    input: [],
    output: [],
    parameters: envPath ? { EXECUTION_ENV_PATH: { string_value: envPath } } : {},
  }) as ModelConfig;

describe('python interpreter choice', () => {
  it('python3 from PATH by default; the engine flag, then the model parameter, override it', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), `py-interp-${process.pid}-`));
    try {
      mkdirSync(path.join(dir, 'env', 'bin'), { recursive: true });
      writeFileSync(path.join(dir, 'env', 'bin', 'python3'), '');
      writeFileSync(path.join(dir, 'py'), '');
      expect(resolveInterpreter(cfg(), dir)).toBe('python3');
      expect(resolveInterpreter(cfg(), dir, { 'python-executable': path.join(dir, 'py') })).toBe(path.join(dir, 'py'));
      expect(resolveInterpreter(cfg(), dir, { 'execution-env-path': path.join(dir, 'env') })).toBe(path.join(dir, 'env', 'bin', 'python3'));
      expect(resolveInterpreter(cfg('$$TRITON_MODEL_DIRECTORY/env'), dir, { 'python-executable': path.join(dir, 'py') })).toBe(
        path.join(dir, 'env', 'bin', 'python3'),
      );
      expect(() => resolveInterpreter(cfg(path.join(dir, 'nope')), dir)).toThrow(
        /python interpreter '.*nope' not found \(model 'm' parameter EXECUTION_ENV_PATH\)/,
      );
      expect(() => resolveInterpreter(cfg(path.join(dir, 'env.tar.gz')), dir)).toThrow(/packed environment/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('parses --backend-config=<backend>,<key>=<value> in Triton form', () => {
    expect(parseBackendConfig(['python,python-executable=/usr/bin/python3', 'python,x=a=b', 'onnxruntime,k=v'])).toEqual({
      python: { 'python-executable': '/usr/bin/python3', x: 'a=b' },
      onnxruntime: { k: 'v' },
    });
    expect(() => parseBackendConfig(['python'])).toThrow(/expected <backend>,<key>=<value>/);
  });
});
