// The normalized ModelConfig as the engine uses it: the protobuf message in
// JSON form with the .proto field names (snake_case), enums as their names,
// int64 as numbers. Parsing lives in model-config-parser.ts, defaults and
// checks in model-config-utils.ts.

export interface ModelTensorConfig {
  name: string;
  data_type: string; // 'TYPE_FP32'
  format?: string;
  dims: number[];
  reshape?: { shape: number[] };
  is_shape_tensor?: boolean;
  allow_ragged_batch?: boolean;
  optional?: boolean;
  label_filename?: string;
}

/** Triton's BatchInput: a tensor describing the batch, fed to the model under `target_name`. */
export interface BatchInputConfig {
  /** BATCH_ELEMENT_COUNT (default), BATCH_ACCUMULATED_ELEMENT_COUNT, ..._WITH_ZERO, BATCH_MAX_ELEMENT_COUNT_AS_SHAPE, BATCH_ITEM_SHAPE, BATCH_ITEM_SHAPE_FLATTEN. */
  kind?: string;
  target_name?: string[];
  data_type?: string;
  source_input?: string[];
}

/** Triton's BatchOutput: an output the backend scatters to the requests by the shape of `source_input` (ragged batching). */
export interface BatchOutputConfig {
  /** BATCH_SCATTER_WITH_INPUT_SHAPE (the only kind, and the default). */
  kind?: string;
  target_name?: string[];
  source_input?: string[];
}

export interface ModelInstanceGroup {
  name: string;
  kind: 'KIND_AUTO' | 'KIND_GPU' | 'KIND_CPU' | 'KIND_MODEL';
  count: number;
  gpus?: number[];
  /** Resources held while executing, and the share weight (rate limiter). */
  rate_limiter?: { resources?: Array<{ name: string; global?: boolean; count?: number }>; priority?: number };
}

export interface QueuePolicy {
  timeout_action?: 'REJECT' | 'DELAY';
  default_timeout_microseconds?: number;
  allow_timeout_override?: boolean;
  max_queue_size?: number;
}

export interface DynamicBatching {
  preferred_batch_size?: number[];
  max_queue_delay_microseconds?: number;
  preserve_ordering?: boolean;
  priority_levels?: number;
  default_priority_level?: number;
  default_queue_policy?: QueuePolicy;
  priority_queue_policy?: Record<string, QueuePolicy>;
}

export interface EnsembleStep {
  model_name: string;
  model_version: number; // -1 = latest
  input_map: Record<string, string>;
  output_map: Record<string, string>;
}

export interface ModelParameter {
  string_value: string;
}

export interface ModelWarmup {
  name: string;
  batch_size: number;
  inputs: Record<
    string,
    {
      data_type: string;
      dims: number[];
      zero_data?: boolean;
      random_data?: boolean;
      input_data_file?: string;
    }
  >;
  count?: number;
}

export interface VersionPolicy {
  latest?: { num_versions: number };
  all?: Record<string, never>;
  specific?: { versions: number[] };
}

export interface ModelConfig {
  name: string;
  platform?: string;
  backend?: string;
  version_policy?: VersionPolicy;
  max_batch_size: number;
  input: ModelTensorConfig[];
  output: ModelTensorConfig[];
  instance_group?: ModelInstanceGroup[];
  default_model_filename?: string;
  dynamic_batching?: DynamicBatching;
  ensemble_scheduling?: { step: EnsembleStep[] };
  /** Inputs the backend builds from the whole batch (ragged batching). */
  batch_input?: BatchInputConfig[];
  /** Outputs split per request by an input's shape (ragged batching). */
  batch_output?: BatchOutputConfig[];
  parameters?: Record<string, ModelParameter>;
  model_warmup?: ModelWarmup[];
  response_cache?: { enable?: boolean };
  /** Anything else the .proto has is kept as parsed. */
  [field: string]: unknown;
}
