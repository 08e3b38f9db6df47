import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkDefinition, loadFunctionDirectory, resolveFunction } from '../../gateway/calls/function-registry.ts';
import { FunctionBundleSchema, FunctionDefinitionSchema } from '../../gateway/calls/function-schema.ts';
import { callBodySchemaFor, openApiDocument } from '../../gateway/http/openapi.ts';

const md = {
  name: 'search_pipeline_ensemble',
  versions: ['1'],
  platform: 'ensemble',
  inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [-1] }],
  outputs: [{ name: 'FINAL_VECTOR', datatype: 'FP32', shape: [512] }],
};

describe('function definitions', () => {
  it('fills defaults', () => {
    const d = FunctionDefinitionSchema.parse({ name: 'f', target: { model: 'm' } });
    expect(d.target.version).toBe('');
    expect(d.limits).toEqual({ maxBodyBytes: 64 * 1024 * 1024, timeoutMs: 30_000 });
  });

  it('rejects unknown fields and bad values with their paths', () => {
    const r = FunctionDefinitionSchema.safeParse({ name: 'f', target: { model: 'm' }, limits: { timeoutMs: -1 }, extra: 1 });
    expect(r.success).toBe(false);
    const paths = r.error!.issues.map((i) => i.path.join('.'));
    expect(paths).toContain('limits.timeoutMs');
    expect(r.error!.issues.some((i) => i.code === 'unrecognized_keys')).toBe(true);
    expect(FunctionDefinitionSchema.safeParse({ name: 'f', target: { model: 'm' }, auth: { apiKeyEnv: ['1BAD'] } }).success).toBe(false);
  });

  it('refuses a bundle with duplicate names', () => {
    const r = FunctionBundleSchema.safeParse({
      functions: [
        { name: 'a', target: { model: 'm' } },
        { name: 'a', target: { model: 'n' } },
      ],
    });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.message).toBe("duplicate function 'a'");
  });

  it('loads the shipped functions/ folder', () => {
    const defs = loadFunctionDirectory(path.join(import.meta.dirname, '../../functions'));
    const names = defs.map((d) => d.name);
    for (const n of ['search_pipeline_ensemble', 'moderated_search_ensemble', 'product_recommender']) expect(names).toContain(n);
  });

  it('lists every problem of a folder with file names', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fn-'));
    fs.writeFileSync(path.join(dir, 'a.json'), '{"name": "a", "target": {"model": "m"}}');
    fs.writeFileSync(path.join(dir, 'b.json'), '{"name": "a", "target": {"model": "m"}}');
    fs.writeFileSync(path.join(dir, 'c.json'), '{not json');
    fs.writeFileSync(path.join(dir, 'd.json'), '{"name": "d"}');
    let msg = '';
    try {
      loadFunctionDirectory(dir);
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).toContain("b.json: function 'a' is already defined in");
    expect(msg).toContain('c.json: not valid JSON');
    expect(msg).toContain('d.json: target:');
    fs.rmSync(dir, { recursive: true });
  });

  it('checks and resolves a definition against model metadata', () => {
    const def = FunctionDefinitionSchema.parse({
      name: 'img',
      target: { model: md.name },
      inputs: { image: 'RAW_IMAGE' },
      outputs: { embedding: 'FINAL_VECTOR' },
    });
    expect(checkDefinition(def, md)).toEqual([]);
    const fn = resolveFunction(def, md, false);
    expect(fn.inputs).toEqual([{ name: 'image', tensor: 'RAW_IMAGE', datatype: 'UINT8', shape: [-1] }]);
    expect(fn.outputs).toEqual([{ name: 'embedding', tensor: 'FINAL_VECTOR', datatype: 'FP32', shape: [512] }]);
    const bad = FunctionDefinitionSchema.parse({
      name: 'x',
      target: { model: md.name },
      inputs: { image: 'PIXELS' },
      outputs: { v: 'NOPE' },
    });
    expect(checkDefinition(bad, md)).toEqual([
      "input 'image' maps to 'PIXELS', which model 'search_pipeline_ensemble' does not have",
      "model input 'RAW_IMAGE' of 'search_pipeline_ensemble' is not mapped",
      "output 'v' maps to 'NOPE', which model 'search_pipeline_ensemble' does not have",
    ]);
  });

  it('generates OpenAPI from the zod schemas, per function', () => {
    const fn = resolveFunction(FunctionDefinitionSchema.parse({ name: 'img', target: { model: md.name } }), md, true);
    const doc = openApiDocument([fn], '1') as {
      paths: Record<
        string,
        { post?: { requestBody: { content: Record<string, { schema: { properties?: Record<string, { required?: string[] }> } }> } } }
      >;
    };
    const post = doc.paths['/fn/img']!.post!;
    expect(Object.keys(post.requestBody.content)).toContain('image/jpeg');
    expect(post.requestBody.content['application/json']!.schema.properties!.inputs!.required).toEqual(['RAW_IMAGE']);
    expect(callBodySchemaFor(fn).safeParse({ inputs: { RAW_IMAGE: { b64: 'AA==' } } }).success).toBe(true);
    expect(callBodySchemaFor(fn).safeParse({ inputs: { OTHER: [1] } }).success).toBe(false);
    expect(() => JSON.stringify(doc)).not.toThrow();
  });
});
