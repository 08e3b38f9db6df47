// The messages of inference.GRPCInferenceService's other RPCs (health,
// metadata, configuration, statistics, repository, shared memory, trace and
// log settings) and of grpc.health.v1, and the table of every RPC's request
// and response types that the engine's handlers and the client are both
// typed from. Conventions as in kserve-messages.ts.
import type { ModelInferRequest, ModelInferResponse, ModelStreamInferError, ModelStreamInferResponse } from './kserve-messages.ts';

export interface NamedVersion {
  name: string;
  version?: string;
}

export interface ServerMetadataResponse {
  name: string;
  version: string;
  extensions: string[];
}

export interface TensorMetadata {
  name: string;
  datatype: string;
  shape: number[];
}

export interface ModelMetadataResponse {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

/**
 * A model configuration (model_config.proto's ModelConfig, field names as
 * written). Left open here: its typed view is the engine's
 * engine/api/model-config.ts, which the engine normalises and validates.
 */
export type ModelConfigMessage = object;

export interface StatisticDuration {
  count: number;
  ns: number;
}

export interface InferStatistics {
  success: StatisticDuration;
  fail: StatisticDuration;
  queue: StatisticDuration;
  compute_input: StatisticDuration;
  compute_infer: StatisticDuration;
  compute_output: StatisticDuration;
  cache_hit: StatisticDuration;
  cache_miss: StatisticDuration;
}

/** A type, not an interface, so that a row is also a Record<string, unknown> (the console reads rows generically). */
export type ModelStatistics = {
  name: string;
  version: string;
  /** ms since the epoch. */
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: InferStatistics;
  batch_stats: Array<{
    batch_size: number;
    compute_input: StatisticDuration;
    compute_infer: StatisticDuration;
    compute_output: StatisticDuration;
  }>;
  memory_usage: Array<{ type: string; id: number; byte_size: number }>;
};

export interface ModelIndex {
  name: string;
  version: string;
  state: string;
  reason: string;
}

/** ModelRepositoryParameter (a oneof): send exactly one field. */
export interface RepositoryParameter {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'bytes_param';
  bool_param?: boolean;
  int64_param?: number;
  string_param?: string;
  bytes_param?: Uint8Array;
}

export interface RepositoryModelRequest {
  repository_name?: string;
  model_name: string;
  parameters?: Record<string, RepositoryParameter>;
}

export interface RegionStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

export interface CudaRegionStatus {
  name: string;
  device_id: number;
  byte_size: number;
}

export interface SystemSharedMemoryRegisterRequest {
  name: string;
  key: string;
  offset?: number;
  byte_size: number;
}

export interface CudaSharedMemoryRegisterRequest {
  name: string;
  raw_handle: Uint8Array;
  device_id: number;
  byte_size: number;
}

/** TraceSetting's values: a list of strings per setting (an empty list clears it). */
export type TraceSettingValues = Record<string, { value: string[] }>;

/** LogSettings' SettingValue (a oneof): send exactly one field. */
export interface LogSettingValue {
  parameter_choice?: 'bool_param' | 'uint32_param' | 'string_param';
  bool_param?: boolean;
  uint32_param?: number;
  string_param?: string;
}

type Empty = Record<string, never>;

/** grpc.health.v1.HealthCheckResponse's status. */
export type ServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

/**
 * Every unary RPC of inference.GRPCInferenceService: request and response.
 * Responses are what the engine writes and what a reader gets back (a
 * decoded message has every field, defaulted). `B`: raw tensor bytes as in
 * ModelInferResponse.
 */
export interface InferenceRpcs<B extends Uint8Array = Buffer> {
  ServerLive: { req: Empty; res: { live: boolean } };
  ServerReady: { req: Empty; res: { ready: boolean } };
  ModelReady: { req: NamedVersion; res: { ready: boolean } };
  ServerMetadata: { req: Empty; res: ServerMetadataResponse };
  ModelMetadata: { req: NamedVersion; res: ModelMetadataResponse };
  ModelInfer: { req: ModelInferRequest; res: ModelInferResponse<B> };
  ModelConfig: { req: NamedVersion; res: { config: ModelConfigMessage } };
  ModelStatistics: { req: Partial<NamedVersion>; res: { model_stats: ModelStatistics[] } };
  RepositoryIndex: { req: { repository_name?: string; ready?: boolean }; res: { models?: ModelIndex[] } };
  RepositoryModelLoad: { req: RepositoryModelRequest; res: Empty };
  RepositoryModelUnload: { req: RepositoryModelRequest; res: Empty };
  SystemSharedMemoryStatus: { req: { name?: string }; res: { regions?: Record<string, RegionStatus> } };
  SystemSharedMemoryRegister: { req: SystemSharedMemoryRegisterRequest; res: Empty };
  SystemSharedMemoryUnregister: { req: { name: string }; res: Empty };
  CudaSharedMemoryStatus: { req: { name?: string }; res: { regions?: Record<string, CudaRegionStatus> } };
  CudaSharedMemoryRegister: { req: CudaSharedMemoryRegisterRequest; res: Empty };
  CudaSharedMemoryUnregister: { req: { name: string }; res: Empty };
  TraceSetting: { req: { settings?: TraceSettingValues; model_name?: string }; res: { settings?: TraceSettingValues } };
  LogSettings: { req: { settings?: Record<string, LogSettingValue> }; res: { settings?: Record<string, LogSettingValue> } };
}
export type UnaryRpc = keyof InferenceRpcs;

/** ModelStreamInfer (bidirectional): what each side writes. */
export interface StreamInferRpc {
  req: ModelInferRequest;
  res: ModelStreamInferResponse<Uint8Array> | ModelStreamInferError;
}

/** grpc.health.v1.Health/Check. */
export interface HealthCheckRpc {
  req: { service?: string };
  res: { status: ServingStatus };
}
