// Triton's raw binary request (HTTP with Inference-Header-Content-Length: 0):
// the whole body is the one input of a model that has exactly one, its name,
// datatype and shape deduced from the model's config as Triton's core does
// (InferenceRequest::Normalize): batch 1 when the model batches, the config's
// dims with at most one variable dim sized from the byte count, and a BYTES
// input only where the config says [1], the body becoming its one element.
// Texts are Triton's.
import type { ModelConfig } from '../api/model-config.ts';
import type { InferRequest } from '../api/infer-request.ts';
import { elementSize, fromConfigType, serializeBytes } from '../api/datatypes.ts';
import { invalidArg } from '../api/status.ts';

/** The name a frontend gives the raw input until its model's config names it (Triton's raw_input). */
export const RAW_INPUT_NAME = 'raw_input';

/** Give `req`'s raw input its model input's name, datatype and shape (bytes of a BYTES one become its one element). */
export function resolveRawInput(config: ModelConfig, req: InferRequest): void {
  const prefix = req.id ? `[request id: ${req.id}] ` : '';
  if (req.inputs.length !== 1 || config.input.length !== 1) {
    throw invalidArg(
      `${prefix}Raw request must only have 1 input (found ${req.inputs.length}) to be deduced but got ${config.input.length} inputs in '${config.name}' model configuration`,
    );
  }
  const raw = req.inputs[0]!;
  const decl = config.input[0]!;
  const datatype = fromConfigType(decl.data_type);
  const shape: number[] = config.max_batch_size !== 0 ? [1] : [];
  let dynamicAxis = -1;
  let elements = 1;
  for (const d of decl.dims) {
    if (d === -1) {
      if (dynamicAxis !== -1) {
        throw invalidArg(
          `${prefix}The shape of the raw input '${decl.name}' can not be deduced because there are more than one variable-sized dimension`,
        );
      }
      dynamicAxis = shape.length;
    } else {
      elements *= d;
    }
    shape.push(d);
  }
  let data = raw.data;
  if (datatype === 'BYTES') {
    if (decl.dims.length !== 1 || decl.dims[0] !== 1) {
      throw invalidArg(`${prefix}For BYTE datatype raw input '${decl.name}', the model must have input shape [1]`);
    }
    data = serializeBytes([raw.data]); // the body is the one element: its 4-byte length goes first
  } else if (dynamicAxis !== -1) {
    shape[dynamicAxis] = Math.floor(raw.data.byteLength / elements / elementSize(datatype));
  }
  req.inputs = [{ name: decl.name, datatype, shape, data }];
  req.rawInput = false;
}
