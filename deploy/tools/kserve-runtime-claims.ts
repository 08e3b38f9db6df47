// KServe's admission webhook refuses a (Cluster)ServingRuntime whose
// auto-selected model format claims the same priority as another runtime's.
// The rules, as KServe writes them (kserve/kserve
// pkg/webhook/admission/servingruntime/servingruntime_webhook.go,
// validateServingRuntimePriority and validateModelFormatPrioritySame):
//
//  - across two runtimes: both enabled, both single-model (or both
//    multi-model), sharing at least one protocol version; then any two formats
//    that are both autoSelect, have the same name (case-insensitive) and the
//    same version (or both none) must not both set the same priority;
//  - within one runtime: one format name with autoSelect must not carry two
//    different priorities.
//
// BUILT_IN_RUNTIMES records what KServe's own runtimes claim, copied from its
// manifests: charts/kserve-runtime-configs/templates/runtimes/
// clusterservingruntime_kserve-*.yaml (kserve/kserve, commits e866405a and
// 5213668d) plus config/runtimes/kserve-openvino.yaml (commit 0557a12b), which
// some installs add. Only the fields the rules read are kept.
export interface ModelFormatClaim {
  name: string;
  version?: string;
  autoSelect?: boolean;
  priority?: number;
}

export interface RuntimeClaims {
  name: string;
  protocolVersions: string[];
  multiModel?: boolean;
  disabled?: boolean;
  supportedModelFormats: ModelFormatClaim[];
}

const auto = (name: string, version: string, priority: number): ModelFormatClaim => ({ name, version, autoSelect: true, priority });

export const BUILT_IN_RUNTIMES: RuntimeClaims[] = [
  {
    name: 'kserve-tritonserver',
    protocolVersions: ['v2', 'grpc-v2'],
    supportedModelFormats: [
      auto('tensorrt', '8', 1),
      auto('tensorflow', '1', 1),
      auto('tensorflow', '2', 1),
      auto('onnx', '1', 1),
      { name: 'pytorch', version: '1' },
      auto('triton', '2', 1),
    ],
  },
  {
    name: 'kserve-mlserver',
    protocolVersions: ['v2'],
    supportedModelFormats: [
      auto('sklearn', '0', 3),
      auto('sklearn', '1', 3),
      auto('xgboost', '1', 3),
      auto('xgboost', '2', 3),
      auto('lightgbm', '3', 3),
      auto('lightgbm', '4', 3),
      auto('mlflow', '1', 1),
      auto('mlflow', '2', 1),
    ],
  },
  { name: 'kserve-sklearnserver', protocolVersions: ['v1', 'v2'], supportedModelFormats: [auto('sklearn', '1', 2)] },
  { name: 'kserve-xgbserver', protocolVersions: ['v1', 'v2'], supportedModelFormats: [auto('xgboost', '2', 2)] },
  { name: 'kserve-lgbserver', protocolVersions: ['v1', 'v2'], supportedModelFormats: [auto('lightgbm', '4', 2)] },
  { name: 'kserve-paddleserver', protocolVersions: ['v1', 'v2'], supportedModelFormats: [auto('paddle', '2', 1)] },
  { name: 'kserve-pmmlserver', protocolVersions: ['v1', 'v2'], supportedModelFormats: [auto('pmml', '3', 1), auto('pmml', '4', 1)] },
  {
    name: 'kserve-predictiveserver',
    protocolVersions: ['v1', 'v2'],
    supportedModelFormats: [auto('sklearn', '1', 1), auto('xgboost', '2', 1), auto('lightgbm', '4', 1)],
  },
  {
    name: 'kserve-tensorflow-serving',
    protocolVersions: ['v1', 'grpc-v1'],
    supportedModelFormats: [auto('tensorflow', '1', 2), auto('tensorflow', '2', 2)],
  },
  { name: 'kserve-torchserve', protocolVersions: ['v1', 'v2', 'grpc-v2'], supportedModelFormats: [auto('pytorch', '1', 2)] },
  { name: 'kserve-huggingfaceserver', protocolVersions: ['v2', 'v1'], supportedModelFormats: [auto('huggingface', '1', 1)] },
  { name: 'kserve-huggingfaceserver-multinode', protocolVersions: ['v2', 'v1'], supportedModelFormats: [auto('huggingface', '1', 2)] },
  {
    name: 'kserve-openvino',
    protocolVersions: ['v1', 'v2', 'v3', 'grpc-v2'],
    supportedModelFormats: [
      auto('openvino', '10', 1),
      auto('onnx', '1', 2),
      auto('tensorflow', '1', 3),
      { name: 'huggingface', autoSelect: true },
    ],
  },
];

const sameFormat = (a: ModelFormatClaim, b: ModelFormatClaim) => a.name.toLowerCase() === b.name.toLowerCase() && a.version === b.version;

/** Why KServe's webhook would refuse `ours` next to `others` ([] when it would admit it). */
export function priorityConflicts(ours: RuntimeClaims, others: RuntimeClaims[]): string[] {
  if (ours.disabled) return [];
  const out: string[] = [];
  const seen = new Map<string, number | undefined>();
  for (const f of ours.supportedModelFormats.filter((x) => x.autoSelect)) {
    const prior = seen.get(f.name);
    if (seen.has(f.name) && prior !== undefined && f.priority !== undefined && prior !== f.priority) {
      out.push(`${ours.name}: different priorities assigned for the model format ${f.name}`);
    } else if (!seen.has(f.name)) seen.set(f.name, f.priority);
  }
  for (const other of others) {
    if (other.disabled || other.name === ours.name || !!other.multiModel !== !!ours.multiModel) continue;
    if (!other.protocolVersions.some((p) => ours.protocolVersions.includes(p))) continue;
    for (const theirs of other.supportedModelFormats) {
      for (const mine of ours.supportedModelFormats) {
        if (!theirs.autoSelect || !mine.autoSelect || !sameFormat(theirs, mine)) continue;
        if (theirs.priority !== undefined && theirs.priority === mine.priority) {
          out.push(
            `${ours.name}: same priority ${mine.priority} as ${other.name} for the model format ${mine.name}${mine.version ? ` version ${mine.version}` : ''}`,
          );
        }
      }
    }
  }
  return out;
}

/** The claims of a ServingRuntime / ClusterServingRuntime object as parsed from YAML. */
export function runtimeClaims(o: Record<string, any>): RuntimeClaims {
  return {
    name: String(o.metadata?.name),
    protocolVersions: o.spec?.protocolVersions ?? [],
    multiModel: o.spec?.multiModel,
    disabled: o.spec?.disabled,
    supportedModelFormats: o.spec?.supportedModelFormats ?? [],
  };
}
