// ONNX Runtime memory settings as Triton's onnxruntime backend names them
// (parameters enable_mem_arena, enable_mem_pattern, arena_extend_strategy,
// memory.enable_memory_arena_shrinkage) become session and run options; a
// bad value fails the load naming the parameter.
import { describe, expect, it } from 'vitest';
import { runOptionsOf, sessionOptionsOf } from '../../engine/backends/onnxruntime/onnxruntime-backend.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

const cfg = (params: Record<string, string>): ModelConfig =>
  ({
    name: 'm',
    max_batch_size: 0,
    input: [],
    output: [],
    parameters: Object.fromEntries(Object.entries(params).map(([k, v]) => [k, { string_value: v }])),
  }) as unknown as ModelConfig;

describe('onnxruntime memory parameters', () => {
  it('leaves ORT defaults alone when unset', () => {
    const o = sessionOptionsOf(cfg({}), false);
    expect(o).not.toHaveProperty('enableCpuMemArena');
    expect(o).not.toHaveProperty('enableMemPattern');
    expect(runOptionsOf(cfg({}))).toBeUndefined();
  });

  it('maps enable_mem_arena and enable_mem_pattern to the session options', () => {
    expect(sessionOptionsOf(cfg({ enable_mem_arena: '0', enable_mem_pattern: 'false' }), false)).toMatchObject({
      enableCpuMemArena: false,
      enableMemPattern: false,
    });
    expect(sessionOptionsOf(cfg({ enable_mem_arena: '1', enable_mem_pattern: 'true' }), false)).toMatchObject({
      enableCpuMemArena: true,
      enableMemPattern: true,
    });
  });

  it('passes arena_extend_strategy to the CUDA provider and memory.enable_memory_arena_shrinkage to every run', () => {
    const o = sessionOptionsOf(cfg({ arena_extend_strategy: 'kSameAsRequested' }), true);
    expect((o.executionProviders as unknown[])[0]).toMatchObject({ name: 'cuda', arena_extend_strategy: 1 });
    expect(runOptionsOf(cfg({ 'memory.enable_memory_arena_shrinkage': 'cpu:0' }))).toEqual({
      extra: { memory: { enable_memory_arena_shrinkage: 'cpu:0' } },
    });
  });

  it('refuses bad values naming the parameter', () => {
    expect(() => sessionOptionsOf(cfg({ enable_mem_arena: 'maybe' }), false)).toThrow(/parameter 'enable_mem_arena' must be/);
    expect(() => sessionOptionsOf(cfg({ arena_extend_strategy: '2' }), false)).toThrow(/'arena_extend_strategy' must be 0/);
    expect(() => runOptionsOf(cfg({ 'memory.enable_memory_arena_shrinkage': 'cpu' }))).toThrow(/must list devices like "cpu:0"/);
    expect(() => runOptionsOf(cfg({ 'memory.enable_memory_arena_shrinkage': 'cpu:0', enable_mem_arena: '0' }))).toThrow(
      /'enable_mem_arena' turns it off/,
    );
  });
});
