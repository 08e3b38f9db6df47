// The KServe v2 / Triton inference messages (grpc_service.proto) as
// TypeScript types, for both sides: the engine's gRPC frontend reads requests
// and writes responses with them, the client and the gateway write requests
// and read responses. Field names are the proto's (snake_case); int64 and
// uint64 are JS numbers (protocol/index.ts configures protobufjs so); bytes
// are Uint8Arrays (Buffers once decoded: views of the received message).
//
// Optional fields are those a sender may leave out (proto3 defaults them).
// A decoded message reads every scalar field as its default when it was not
// sent ('' / 0 / false / []), so readers may treat optional scalars as
// present, and a decoded oneof also names its set field in `parameter_choice`
// (protobufjs's oneof getter).

/** The fields of InferParameter's oneof. */
export type InferParameterChoice = 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param';

/** InferParameter: send exactly one field; a decoded one says which in `parameter_choice`. */
export interface InferParameter {
  parameter_choice?: InferParameterChoice;
  bool_param?: boolean;
  /** A number, or a bigint past 2^53 (decoded so; sent exactly: protocol/exact-int64.ts). */
  int64_param?: number | bigint;
  string_param?: string;
  double_param?: number;
  uint64_param?: number | bigint;
}
export type Parameters = Record<string, InferParameter>;

/** Typed tensor contents (the alternative to raw_*_contents). */
export interface InferTensorContents {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: number[];
  uint_contents?: number[];
  uint64_contents?: number[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Uint8Array[];
}

export interface InferInputTensor {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Parameters;
  contents?: InferTensorContents;
}

export interface InferRequestedOutputTensor {
  name: string;
  parameters?: Parameters;
}

export interface ModelInferRequest {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Parameters;
  inputs: InferInputTensor[];
  outputs?: InferRequestedOutputTensor[];
  raw_input_contents?: Uint8Array[];
}

export interface InferOutputTensor {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Parameters;
  contents?: InferTensorContents;
}

/**
 * `B`: the type of the raw output bytes: Buffer where a response was decoded
 * (the client's side), Uint8Array where one is built (the engine's).
 */
export interface ModelInferResponse<B extends Uint8Array = Buffer> {
  model_name: string;
  model_version: string;
  /** Sent only when the request had one; decoded as '' otherwise. */
  id?: string;
  parameters?: Parameters;
  outputs: InferOutputTensor[];
  raw_output_contents: B[];
}

/** One message of ModelStreamInfer's response stream, as a reader sees it. */
export interface ModelStreamInferResponse<B extends Uint8Array = Buffer> {
  /** Empty for an answer; the error of one request otherwise. */
  error_message: string;
  infer_response?: ModelInferResponse<B>;
}

/** What a server writes for a stream request that failed: the error, and the request's model_name and id. */
export interface ModelStreamInferError {
  error_message: string;
  infer_response: Pick<ModelInferRequest, 'model_name' | 'id'>;
}
