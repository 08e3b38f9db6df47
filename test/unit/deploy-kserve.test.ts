// The KServe runtime and example InferenceService against our schema of
// KServe's documented fields (unknown fields refused, core types checked by
// kubernetes-models), KServe's admission rule on runtime priorities, the
// runtime's Triton arguments accepted by the engine CLI, and the Prometheus
// Adapter rule's shape.
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { checkSchema } from '../../deploy/tools/k8s-validate.ts';
import { KSERVE_SCHEMAS, PROMETHEUS_ADAPTER_VALUES } from '../../deploy/tools/kserve-schema.ts';
import { BUILT_IN_RUNTIMES, priorityConflicts, runtimeClaims } from '../../deploy/tools/kserve-runtime-claims.ts';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
type Obj = Record<string, any>;
const load = (rel: string): Obj => parse(fs.readFileSync(path.join(ROOT, rel), 'utf8')) as Obj;
const check = (o: Obj) => checkSchema(o, KSERVE_SCHEMAS[`${o.apiVersion} ${o.kind}`]!);

describe('KServe manifests', () => {
  const runtime = load('deploy/kserve/cluster-serving-runtime.yaml');
  const isvc = load('deploy/kserve/inference-service.yaml');

  it('validate against the documented KServe fields', () => {
    expect(check(runtime)).toEqual([]);
    expect(check(isvc)).toEqual([]);
  });

  it('the runtime serves onnx, python and js models over v2 and grpc-v2; the example selects it', () => {
    expect(runtime.spec.supportedModelFormats.map((f: Obj) => f.name)).toEqual(expect.arrayContaining(['onnx', 'python', 'js']));
    expect(runtime.spec.protocolVersions).toEqual(['v2', 'grpc-v2']);
    expect(isvc.spec.predictor.model.runtime).toBe(runtime.metadata.name);
    expect(runtime.spec.supportedModelFormats.map((f: Obj) => f.name)).toContain(isvc.spec.predictor.model.modelFormat.name);
  });

  it("takes Triton's KServe arguments, and the engine CLI accepts them", () => {
    const [cmd, ...args] = runtime.spec.containers[0].args as string[];
    expect(cmd).toBe('tritonserver');
    expect(args).toEqual(['--model-store=/mnt/models', '--grpc-port=9000', '--http-port=8080', '--allow-grpc=true', '--allow-http=true']);
    const o = parseEngineArgs(args);
    expect([o.modelRepository, o.grpcPort, o.httpPort, o.metricsPort]).toEqual(['/mnt/models', 9000, 8080, 8002]);
    expect(runtime.spec.annotations['prometheus.kserve.io/port']).toBe(String(o.metricsPort));
    // the image's `tritonserver` command starts the engine with those flags
    const wrapper = fs.readFileSync(path.join(ROOT, 'deploy/docker/tritonserver'), 'utf8');
    expect(wrapper).toMatch(/exec node (--\S+ )*dist\/engine\/main\.js "\$@"/);
  });

  it("KServe's webhook would admit the runtime next to every built-in runtime (no format claimed at a priority a built-in holds)", () => {
    expect(priorityConflicts(runtimeClaims(runtime), BUILT_IN_RUNTIMES)).toEqual([]);
    // What it refused before: onnx auto-selected at priority 1, as kserve-tritonserver claims it.
    const before = structuredClone(runtime);
    before.spec.supportedModelFormats[0] = { name: 'onnx', version: '1', autoSelect: true, priority: 1 };
    expect(priorityConflicts(runtimeClaims(before), BUILT_IN_RUNTIMES)).toEqual([
      'tritonish-runtime: same priority 1 as kserve-tritonserver for the model format onnx version 1',
    ]);
    // Priority 2 collides with kserve-openvino's onnx; a priority no built-in holds is admitted.
    before.spec.supportedModelFormats[0].priority = 2;
    expect(priorityConflicts(runtimeClaims(before), BUILT_IN_RUNTIMES)).toEqual([
      'tritonish-runtime: same priority 2 as kserve-openvino for the model format onnx version 1',
    ]);
    before.spec.supportedModelFormats[0].priority = 10;
    expect(priorityConflicts(runtimeClaims(before), BUILT_IN_RUNTIMES)).toEqual([]);
  });

  it("the webhook rule's other conditions: disabled, other protocols, multi-model, two priorities for one format", () => {
    const claim = {
      name: 'x',
      protocolVersions: ['v2'],
      supportedModelFormats: [{ name: 'ONNX', version: '1', autoSelect: true, priority: 1 }],
    };
    expect(priorityConflicts(claim, BUILT_IN_RUNTIMES)).toHaveLength(1); // names compare case-insensitively
    expect(priorityConflicts({ ...claim, disabled: true }, BUILT_IN_RUNTIMES)).toEqual([]);
    expect(priorityConflicts({ ...claim, multiModel: true }, BUILT_IN_RUNTIMES)).toEqual([]);
    expect(priorityConflicts({ ...claim, protocolVersions: ['v1'] }, BUILT_IN_RUNTIMES)).toEqual([]);
    const twice = {
      ...claim,
      supportedModelFormats: [...claim.supportedModelFormats, { name: 'ONNX', version: '2', autoSelect: true, priority: 5 }],
    };
    expect(priorityConflicts(twice, [])).toEqual(['x: different priorities assigned for the model format ONNX']);
  });

  it('the runtime container drops every capability, as the chart does; the example uses the deploymentMode name KServe keeps', () => {
    const sc = runtime.spec.containers[0].securityContext;
    expect(sc).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    // KServe's constants: RawDeployment is deprecated (LegacyRawDeployment), Standard is its name now.
    expect(isvc.metadata.annotations['serving.kserve.io/deploymentMode']).toBe('Standard');
  });

  it('refuses unknown fields, wrong types and bad enums, at any depth', () => {
    const bad = structuredClone(isvc);
    bad.spec.predictor.model.storageURI = 'pvc://typo/';
    bad.spec.predictor.minReplica = 1;
    bad.spec.predictor.model.resources.requests.cpuu = '1'; // inside the inlined Container: a ResourceList takes any name
    bad.spec.predictor.model.protocolVersion = 'v3';
    const errs = check(bad);
    expect(errs).toContain("spec.predictor: unknown field 'minReplica'");
    expect(errs).toContain("spec.predictor.model: unknown field 'storageURI'");
    expect(errs).toContain("spec.predictor.model.protocolVersion: 'v3' is not one of v1, v2, grpc-v2");
    expect(errs).toHaveLength(3);
    const rt = structuredClone(runtime);
    rt.spec.containers[0].imagePullPolcy = 'Always';
    rt.spec.supportedModelFormats[0].autoSelect = 'yes';
    rt.spec.supportedModelFormats[2].priority = 0;
    expect(check(rt).sort()).toEqual([
      "spec.containers[0]: unknown field 'imagePullPolcy'",
      'spec.supportedModelFormats[0].autoSelect: expected a boolean',
      'spec.supportedModelFormats[2].priority: 0 is less than the minimum 1',
    ]);
  });
});

describe('Prometheus Adapter rule', () => {
  it('has the shape the adapter chart takes', () => {
    const v = load('deploy/prometheus-adapter/rules.yaml');
    expect(checkSchema(v, PROMETHEUS_ADAPTER_VALUES)).toEqual([]);
    expect(checkSchema({ rules: { custom: [{ seriesQuery: 'x', metricQuery: 'typo' }] } }, PROMETHEUS_ADAPTER_VALUES)).toEqual([
      "rules.custom[0]: missing required field 'metricsQuery'",
      "rules.custom[0]: unknown field 'metricQuery'",
    ]);
  });
});
