// A small pure-JS ONNX graph builder (onnx-proto / protobufjs): opset 17,
// IR version 8, weights from a seeded PRNG so the same script writes the same
// bytes every run. It tracks per-sample shapes (batch excluded) of the values
// its layer helpers produce, so it can count FLOPs as it goes.
// Imports nothing from the project: model_repository/ stands alone.
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;

export const OPSET = 17;
export const IR_VERSION = 8;

/** ONNX element types used here (TensorProto.DataType). */
export const ElemType = {
  FLOAT: 1,
  UINT8: 2,
  INT32: 6,
  INT64: 7,
  STRING: 8,
} as const;
export type ElemType = (typeof ElemType)[keyof typeof ElemType];

/** mulberry32: a tiny seeded PRNG, uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type AttrValue = number | string | number[] | { float: number } | { floats: number[] };
type Dim = number | string;

function attribute(name: string, v: AttrValue): onnxProto.onnx.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof v === 'number') return { name, type: T.INT, i: v };
  if (typeof v === 'string') return { name, type: T.STRING, s: new TextEncoder().encode(v) };
  if (Array.isArray(v)) return { name, type: T.INTS, ints: v };
  if ('float' in v) return { name, type: T.FLOAT, f: v.float };
  return { name, type: T.FLOATS, floats: v.floats };
}

/** `{ float: x }` marks a FLOAT attribute (plain numbers are INT). */
export const f = (x: number) => ({ float: x });

function valueInfo(name: string, elemType: ElemType, dims: Dim[]): onnxProto.onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

function rawBytes(data: Float32Array | Int32Array | BigInt64Array | Uint8Array): Uint8Array {
  // Typed arrays are little-endian on every platform we run on (x86-64, arm64).
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
}

/**
 * Builds one ONNX graph. Owns its node list, initializers and a map of
 * per-sample shapes; not shared between threads (it is a build-time tool).
 */
export class GraphBuilder {
  private readonly nodes: onnxProto.onnx.INodeProto[] = [];
  private readonly inits: onnxProto.onnx.ITensorProto[] = [];
  private readonly inputs: onnxProto.onnx.IValueInfoProto[] = [];
  private readonly outputs: onnxProto.onnx.IValueInfoProto[] = [];
  private readonly shapes = new Map<string, number[]>();
  private readonly rand: () => number;
  private counter = 0;
  /** Floating-point operations per sample (multiply-add = 2), counted by the layer helpers. */
  flops = 0;

  constructor(
    readonly name: string,
    seed: number,
  ) {
    this.rand = prng(seed);
  }

  /** A graph input; `dims` includes the batch dim (e.g. 'batch'). Per-sample shape is dims[1..] when dims[0] is a string. */
  input(name: string, elemType: ElemType, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, elemType, dims));
    this.trackShape(name, dims);
    return name;
  }

  /** Declare a graph output, produced by the node whose output is `name`. */
  output(name: string, elemType: ElemType, dims: Dim[]): string {
    this.outputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  private trackShape(name: string, dims: Dim[]): void {
    const perSample = typeof dims[0] === 'string' ? dims.slice(1) : dims;
    if (perSample.every((d) => typeof d === 'number')) this.shapes.set(name, perSample as number[]);
  }

  /** Per-sample shape of a value produced by a helper (batch excluded). */
  shape(name: string): number[] {
    const s = this.shapes.get(name);
    if (!s) throw new Error(`onnx-builder: no tracked shape for '${name}'`);
    return s;
  }

  private fresh(prefix: string): string {
    return `${prefix}_${this.counter++}`;
  }

  /** A constant tensor in the graph's initializers. */
  initializer(name: string, dims: number[], data: Float32Array | Int32Array | BigInt64Array | Uint8Array): string {
    const T = onnx.TensorProto.DataType;
    const dataType =
      data instanceof Float32Array ? T.FLOAT : data instanceof Int32Array ? T.INT32 : data instanceof BigInt64Array ? T.INT64 : T.UINT8;
    this.inits.push({ name, dims, dataType, rawData: rawBytes(data) });
    return name;
  }

  /** Uniform weights in ±sqrt(6/fanIn)·gain (He-uniform for gain 1): ReLU stacks keep their scale. */
  randomWeight(prefix: string, dims: number[], fanIn: number, gain = 1): string {
    const n = dims.reduce((a, b) => a * b, 1);
    const bound = gain * Math.sqrt(6 / fanIn);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = (this.rand() * 2 - 1) * bound;
    return this.initializer(this.fresh(prefix), dims, data);
  }

  /** Small random biases (±0.05). */
  randomBias(prefix: string, n: number): string {
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = (this.rand() * 2 - 1) * 0.05;
    return this.initializer(this.fresh(prefix), [n], data);
  }

  /** A float constant of any shape. */
  constFloat(prefix: string, dims: number[], values: number[] | Float32Array): string {
    return this.initializer(this.fresh(prefix), dims, Float32Array.from(values));
  }

  /** An int64 constant (shapes, axes). */
  constInt64(prefix: string, values: number[]): string {
    return this.initializer(this.fresh(prefix), [values.length], BigInt64Array.from(values.map(BigInt)));
  }

  /** Any node; returns its first output name. `shape` records the per-sample output shape. */
  node(opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}, out?: string, shape?: number[]): string {
    const output = out ?? this.fresh(opType.toLowerCase());
    this.nodes.push({
      opType,
      name: this.fresh(`n_${opType}`),
      input: inputs,
      output: [output],
      attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)),
    });
    if (shape) this.shapes.set(output, shape);
    return output;
  }

  /** Conv with random weights + bias; x is [C,H,W] per sample. */
  conv(x: string, outC: number, k: number, stride = 1, pad = Math.floor(k / 2), out?: string): string {
    const [c, h, w] = this.shape(x);
    const ho = Math.floor((h + 2 * pad - k) / stride) + 1;
    const wo = Math.floor((w + 2 * pad - k) / stride) + 1;
    const W = this.randomWeight('conv_w', [outC, c, k, k], c * k * k);
    const B = this.randomBias('conv_b', outC);
    this.flops += 2 * outC * ho * wo * c * k * k;
    return this.node('Conv', [x, W, B], { kernel_shape: [k, k], strides: [stride, stride], pads: [pad, pad, pad, pad] }, out, [
      outC,
      ho,
      wo,
    ]);
  }

  relu(x: string, out?: string): string {
    this.flops += this.size(x);
    return this.node('Relu', [x], {}, out, this.shape(x));
  }

  maxPool(x: string, k: number, stride = k, out?: string): string {
    const [c, h, w] = this.shape(x);
    const ho = Math.floor((h - k) / stride) + 1;
    const wo = Math.floor((w - k) / stride) + 1;
    this.flops += c * ho * wo * k * k;
    return this.node('MaxPool', [x], { kernel_shape: [k, k], strides: [stride, stride] }, out, [c, ho, wo]);
  }

  /** GlobalAveragePool then Flatten: [C,H,W] → [C]. */
  globalAvgPoolFlat(x: string, out?: string): string {
    const [c, h, w] = this.shape(x);
    this.flops += c * h * w;
    const p = this.node('GlobalAveragePool', [x], {}, undefined, [c, 1, 1]);
    return this.node('Flatten', [p], { axis: 1 }, out, [c]);
  }

  /** Fully connected via Gemm (x [N,in] · Wᵀ + b). */
  gemm(x: string, outF: number, out?: string, gain = 1): string {
    const [inF] = this.shape(x);
    const W = this.randomWeight('fc_w', [outF, inF], inF, gain);
    const B = this.randomBias('fc_b', outF);
    this.flops += 2 * inF * outF;
    return this.node('Gemm', [x, W, B], { transB: 1 }, out, [outF]);
  }

  /** Fully connected via MatMul + Add. */
  matmulAdd(x: string, outF: number, out?: string, gain = 1): string {
    const [inF] = this.shape(x);
    const W = this.randomWeight('mm_w', [inF, outF], inF, gain);
    const B = this.randomBias('mm_b', outF);
    this.flops += 2 * inF * outF + outF;
    const m = this.node('MatMul', [x, W], {}, undefined, [outF]);
    return this.node('Add', [m, B], {}, out, [outF]);
  }

  softmax(x: string, out?: string): string {
    this.flops += 3 * this.size(x);
    return this.node('Softmax', [x], { axis: -1 }, out, this.shape(x));
  }

  sigmoid(x: string, out?: string): string {
    this.flops += 3 * this.size(x);
    return this.node('Sigmoid', [x], {}, out, this.shape(x));
  }

  /** Row-wise L2 normalization of [D]: x / max(‖x‖₂, 1e-12). */
  l2Normalize(x: string, out?: string): string {
    const s = this.shape(x);
    this.flops += 3 * this.size(x);
    const norm = this.node('ReduceL2', [x], { axes: [-1], keepdims: 1 }, undefined, [1]);
    const eps = this.constFloat('eps', [], [1e-12]);
    const safe = this.node('Max', [norm, eps], {}, undefined, [1]);
    return this.node('Div', [x, safe], {}, out, s);
  }

  private size(x: string): number {
    return this.shape(x).reduce((a, b) => a * b, 1);
  }

  /** Serialize to ONNX ModelProto bytes (deterministic for a deterministic build). */
  build(docString = ''): Uint8Array {
    if (this.outputs.length === 0) throw new Error(`onnx-builder: graph '${this.name}' has no outputs`);
    const model = onnx.ModelProto.create({
      irVersion: IR_VERSION,
      opsetImport: [{ domain: '', version: OPSET }],
      producerName: 'tritonish-onnx-builder',
      producerVersion: '1',
      docString,
      graph: {
        name: this.name,
        node: this.nodes,
        initializer: this.inits,
        input: this.inputs,
        output: this.outputs,
      },
    });
    return onnx.ModelProto.encode(model).finish();
  }
}
