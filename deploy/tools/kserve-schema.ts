// Structural schemas of the two KServe resources we ship, written from
// KServe's documented API (serving.kserve.io v1alpha1 ServingRuntimeSpec,
// v1beta1 InferenceServiceSpec / PredictorSpec / ModelSpec). They hold the
// fields KServe documents for these objects (not the whole CRD: explainers,
// transformers, worker specs and storage specs are left out, so using one
// of those fails the check until it is added here). checkSchema() refuses any
// field not listed; Kubernetes core types are checked by kubernetes-models.
import type { Schema } from './k8s-validate.ts';

const str: Schema = { type: 'string' };
const int: Schema = { type: 'integer' };
const bool: Schema = { type: 'boolean' };
const strMap: Schema = { type: 'object', additionalProperties: str };
const list = (items: Schema): Schema => ({ type: 'array', items });
const k8s = (t: string): Schema => ({ k8s: t });

const metadata: Schema = {
  type: 'object',
  required: ['name'],
  properties: { name: str, namespace: str, labels: strMap, annotations: strMap },
};

/** ServingRuntimeSpec: shared by ServingRuntime and ClusterServingRuntime. */
const servingRuntimeSpec: Schema = {
  type: 'object',
  required: ['containers'],
  properties: {
    supportedModelFormats: list({
      type: 'object',
      required: ['name'],
      // KServe's CRD: priority is an int32 with minimum 1 (+kubebuilder:validation:Minimum=1).
      properties: { name: str, version: str, autoSelect: bool, priority: { type: 'integer', minimum: 1 } },
    }),
    multiModel: bool,
    disabled: bool,
    protocolVersions: list({ type: 'string', enum: ['v1', 'v2', 'grpc-v1', 'grpc-v2'] }),
    containers: list(k8s('v1/Container')),
    volumes: list(k8s('v1/Volume')),
    nodeSelector: strMap,
    tolerations: list(k8s('v1/Toleration')),
    affinity: k8s('v1/Affinity'),
    annotations: strMap,
    labels: strMap,
    imagePullSecrets: list({ type: 'object', properties: { name: str } }),
    grpcEndpoint: str,
    grpcDataEndpoint: str,
    httpDataEndpoint: str,
    replicas: int,
    hostIPC: bool,
    storageHelper: { type: 'object', properties: { disabled: bool } },
    builtInAdapter: {
      type: 'object',
      properties: {
        serverType: str,
        runtimeManagementPort: int,
        memBufferBytes: int,
        modelLoadingTimeoutMillis: int,
        env: list(k8s('v1/EnvVar')),
      },
    },
  },
};

/** ModelSpec: the model's own fields, plus an inlined Container (resources, env, args, ...). */
const modelSpec: Schema = {
  type: 'object',
  required: ['modelFormat'],
  inlines: 'v1/Container',
  properties: {
    modelFormat: { type: 'object', required: ['name'], properties: { name: str, version: str } },
    runtime: str,
    protocolVersion: { type: 'string', enum: ['v1', 'v2', 'grpc-v2'] },
    storageUri: str,
    runtimeVersion: str,
  },
};

const predictorSpec: Schema = {
  type: 'object',
  properties: {
    model: modelSpec,
    minReplicas: int,
    maxReplicas: int,
    scaleTarget: int,
    scaleMetric: { type: 'string', enum: ['cpu', 'memory', 'concurrency', 'rps'] },
    containerConcurrency: int,
    timeout: int,
    canaryTrafficPercent: int,
    serviceAccountName: str,
    nodeSelector: strMap,
    tolerations: list(k8s('v1/Toleration')),
    affinity: k8s('v1/Affinity'),
    annotations: strMap,
    labels: strMap,
    containers: list(k8s('v1/Container')),
    volumes: list(k8s('v1/Volume')),
    imagePullSecrets: list({ type: 'object', properties: { name: str } }),
  },
};

const resource = (apiVersion: string, kind: string, spec: Schema): Schema => ({
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  properties: { apiVersion: { type: 'string', enum: [apiVersion] }, kind: { type: 'string', enum: [kind] }, metadata, spec },
});

/** Schemas by `apiVersion kind`. */
export const KSERVE_SCHEMAS: Record<string, Schema> = {
  'serving.kserve.io/v1alpha1 ClusterServingRuntime': resource('serving.kserve.io/v1alpha1', 'ClusterServingRuntime', servingRuntimeSpec),
  'serving.kserve.io/v1alpha1 ServingRuntime': resource('serving.kserve.io/v1alpha1', 'ServingRuntime', servingRuntimeSpec),
  'serving.kserve.io/v1beta1 InferenceService': resource('serving.kserve.io/v1beta1', 'InferenceService', {
    type: 'object',
    required: ['predictor'],
    properties: { predictor: predictorSpec },
  }),
};

/** The Prometheus Adapter chart's values for our rule (the parts of its config we use). */
export const PROMETHEUS_ADAPTER_VALUES: Schema = {
  type: 'object',
  required: ['rules'],
  properties: {
    rules: {
      type: 'object',
      properties: {
        default: bool,
        custom: list({
          type: 'object',
          required: ['seriesQuery', 'metricsQuery'],
          properties: {
            seriesQuery: str,
            seriesFilters: list({ type: 'object', properties: { is: str, isNot: str } }),
            resources: {
              type: 'object',
              properties: {
                overrides: { type: 'object', additionalProperties: { type: 'object', properties: { group: str, resource: str } } },
                template: str,
              },
            },
            name: { type: 'object', properties: { matches: str, as: str } },
            metricsQuery: str,
          },
        }),
      },
    },
  },
};
