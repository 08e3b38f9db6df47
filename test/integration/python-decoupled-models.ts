// The model.py files of L0_python_decoupled: our own, written after the
// behaviours of Triton's python_backend examples (decoupled square,
// bls_decoupled) and its L0_backend_python qa models (async_execute,
// decoupled cancellation).

const INT_IO = `input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
`;
const decoupledConfig = (name: string, io = INT_IO) =>
  `name: "${name}"\nbackend: "python"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n${io}`;

/** async execute that returns at once; tasks it created send IN responses (OUT = 0..IN-1) later. */
const ASYNC_TASKS = `import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            asyncio.create_task(self.later(request.get_response_sender(), n))
        return None

    async def later(self, sender, n):
        await asyncio.sleep(0.05)
        for i in range(n):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], dtype=np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`;

/** Triton's async_execute_decouple shape: await WAIT_SECONDS, then one response and the final flag. */
const ASYNC_WAIT = `import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            wait_secs = float(pb_utils.get_input_tensor_by_name(request, "WAIT_SECONDS").as_numpy()[0])
            if wait_secs < 0:
                raise ValueError("wait_secs cannot be negative")
            await asyncio.sleep(wait_secs)
            out = pb_utils.Tensor("DUMMY_OUT", np.array([wait_secs], dtype=np.float32))
            request.get_response_sender().send(pb_utils.InferenceResponse([out]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`;

/** A thread per request sends IN responses 200 ms apart, then the final flag (execute returns at once). */
const SLOW_STREAM = `import threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            threading.Thread(target=self.run, args=(request.get_response_sender(), n), daemon=True).start()
        return None

    def run(self, sender, n):
        for i in range(n):
            if i:
                time.sleep(0.2)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], dtype=np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`;

/** Triton's decoupled square example: IN responses with OUT = IN, then the final flag alone. */
const SQUARE = `import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            threading.Thread(target=self.run, args=(request.get_response_sender(), n), daemon=True).start()
        return None

    def run(self, sender, n):
        for _ in range(n):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([n], dtype=np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`;

/** exec(decoupled=True) on square_int32: SUM of every OUT, COUNT of responses (the empty final included). IN < 0: a plain exec(). */
const BLS_DECOUPLED_SYNC = `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            num = pb_utils.get_input_tensor_by_name(request, "IN")
            bls = pb_utils.InferenceRequest(model_name="square_int32", inputs=[num], requested_output_names=["OUT"])
            if int(num.as_numpy()[0]) < 0:
                r = bls.exec()
                raise pb_utils.TritonModelException(r.error().message() if r.has_error() else "no error")
            total, count = np.array([0], dtype=np.int32), 0
            for r in bls.exec(decoupled=True):
                if r.has_error():
                    raise pb_utils.TritonModelException(r.error().message())
                count += 1
                if len(r.output_tensors()) > 0:
                    total += pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM", total), pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32))]))
        return responses
`;

/** Two async_exec(decoupled=True) calls gathered; one read with for, the other with async for. */
const BLS_DECOUPLED_ASYNC = `import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            num = pb_utils.get_input_tensor_by_name(request, "IN")
            calls = [pb_utils.InferenceRequest(model_name="square_int32", inputs=[num], requested_output_names=["OUT"]).async_exec(decoupled=True)
                     for _ in range(2)]
            first, second = await asyncio.gather(*calls)
            total = np.array([0], dtype=np.int32)
            for r in first:
                if len(r.output_tensors()) > 0:
                    total += pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()
            async for r in second:
                if len(r.output_tensors()) > 0:
                    total += pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", total)]))
        return responses
`;

/** One response at once, then up to 10 s watching is_cancelled(); once seen: a marker file and the CANCELLED end. */
const CANCEL_WATCH = `import os, threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.dir = args["model_repository"]

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.run, args=(request,), daemon=True).start()
        return None

    def run(self, request):
        sender = request.get_response_sender()
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], dtype=np.int32))]))
        end = time.time() + 10
        while time.time() < end:
            if request.is_cancelled() and sender.is_cancelled():
                open(os.path.join(self.dir, "cancelled-" + request.request_id()), "w").close()
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            time.sleep(0.02)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`;

/** A plain model that watches is_cancelled() for up to 10 s inside execute. */
const CANCEL_PLAIN = `import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.dir = args["model_repository"]

    def execute(self, requests):
        request = requests[0]
        end = time.time() + 10
        while time.time() < end:
            if request.is_cancelled():
                open(os.path.join(self.dir, "cancelled-" + request.request_id()), "w").close()
                return [pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED))]
            time.sleep(0.02)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], dtype=np.int32))])]
`;

/** A decoupled model that returns a response list (Triton refuses it). */
const RETURNS_LIST = `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], dtype=np.int32))]) for _ in requests]
`;

/** Sends OUT = 1 every 20 ms, up to 200 times, until its request is cancelled (then a CANCELLED error, final). */
const UNTIL_CANCELLED = `import threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.run, args=(request,), daemon=True).start()
        return None

    def run(self, request):
        sender = request.get_response_sender()
        for _ in range(200):
            if request.is_cancelled():
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], dtype=np.int32))]))
            time.sleep(0.02)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`;

/** As Triton's decoupled_bls_cancel: sum the stream of until_cancelled up to IN, then cancel() it; SUM, and 1 when CANCELLED was seen. */
const BLS_CANCEL = `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        max_sum = int(pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy()[0])
        stream = pb_utils.InferenceRequest(model_name="until_cancelled", inputs=[pb_utils.Tensor("IN", np.array([0], dtype=np.int32))],
                                           requested_output_names=["OUT"]).exec(decoupled=True)
        total, seen = 0, 0
        for r in stream:
            if r.has_error():
                seen = 1 if r.error().code() == pb_utils.TritonError.CANCELLED else -1
                break
            out = int(pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()[0])
            if total + out > max_sum:
                stream.cancel()
            else:
                total += out
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SUM", np.array([total], dtype=np.int32)),
                                            pb_utils.Tensor("COUNT", np.array([seen], dtype=np.int32))])]
`;

const plainConfig = (name: string, io: string) => `name: "${name}"\nbackend: "python"\nmax_batch_size: 0\n${io}`;

export const MODELS: Record<string, { config: string; model: string }> = {
  async_tasks: { config: decoupledConfig('async_tasks'), model: ASYNC_TASKS },
  async_wait: {
    config: decoupledConfig(
      'async_wait',
      `input [ { name: "WAIT_SECONDS", data_type: TYPE_FP32, dims: [ 1 ] } ]\noutput [ { name: "DUMMY_OUT", data_type: TYPE_FP32, dims: [ 1 ] } ]\n`,
    ),
    model: ASYNC_WAIT,
  },
  slow_stream: { config: decoupledConfig('slow_stream'), model: SLOW_STREAM },
  square_int32: { config: decoupledConfig('square_int32'), model: SQUARE },
  bls_decoupled_sync: {
    config: plainConfig(
      'bls_decoupled_sync',
      `input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]\noutput [\n  { name: "SUM", data_type: TYPE_INT32, dims: [ 1 ] },\n  { name: "COUNT", data_type: TYPE_INT32, dims: [ 1 ] }\n]\n`,
    ),
    model: BLS_DECOUPLED_SYNC,
  },
  bls_decoupled_async: {
    config: plainConfig(
      'bls_decoupled_async',
      `input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]\noutput [ { name: "SUM", data_type: TYPE_INT32, dims: [ 1 ] } ]\n`,
    ),
    model: BLS_DECOUPLED_ASYNC,
  },
  cancel_watch: { config: decoupledConfig('cancel_watch'), model: CANCEL_WATCH },
  cancel_plain: { config: plainConfig('cancel_plain', INT_IO), model: CANCEL_PLAIN },
  returns_list: { config: decoupledConfig('returns_list'), model: RETURNS_LIST },
  until_cancelled: { config: decoupledConfig('until_cancelled'), model: UNTIL_CANCELLED },
  bls_cancel: {
    config: plainConfig(
      'bls_cancel',
      `input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]\noutput [\n  { name: "SUM", data_type: TYPE_INT32, dims: [ 1 ] },\n  { name: "COUNT", data_type: TYPE_INT32, dims: [ 1 ] }\n]\n`,
    ),
    model: BLS_CANCEL,
  },
};
