// The model.py files of L0_python_response_sender: our own, written after the
// behaviour that Triton's L0_backend_python response_sender test expects of
// its models. Each request says, in five [1]-shaped inputs, how many
// responses its sender sends before execute returns (and whether the final
// flag follows them), whether execute returns a response for it, and how many
// its sender sends after execute returned (0.3 s later; and whether the final
// flag follows). Every response carries INDEX: 0 for the returned one,
// 1000 + i before the return, 2000 + i after it.

const INPUTS = `input [
  { name: "NUMBER_OF_RESPONSE_BEFORE_RETURN", data_type: TYPE_UINT8, dims: [ 1 ] },
  { name: "SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN", data_type: TYPE_BOOL, dims: [ 1 ] },
  { name: "RETURN_A_RESPONSE", data_type: TYPE_BOOL, dims: [ 1 ] },
  { name: "NUMBER_OF_RESPONSE_AFTER_RETURN", data_type: TYPE_UINT8, dims: [ 1 ] },
  { name: "SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN", data_type: TYPE_BOOL, dims: [ 1 ] }
]
output [ { name: "INDEX", data_type: TYPE_UINT16, dims: [ 1 ] } ]
`;

/** The config of one variant: decoupled or not, batching (a 0.2 s window that gathers a stream's requests) or not. */
export function senderConfig(name: string, decoupled: boolean, batching: boolean): string {
  return `name: "${name}"
backend: "python"
max_batch_size: 8
${INPUTS}instance_group [ { count: 1, kind: KIND_CPU } ]
${decoupled ? 'model_transaction_policy { decoupled: true }\n' : ''}${batching ? 'dynamic_batching { max_queue_delay_microseconds: 200000 }\n' : ''}`;
}

const COMMON = `import asyncio
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def plan_of(request):
    total = lambda name: int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().astype(np.int64).sum())
    rows = pb_utils.get_input_tensor_by_name(request, "RETURN_A_RESPONSE").as_numpy().shape[0]
    return {
        "rows": rows,
        "before": total("NUMBER_OF_RESPONSE_BEFORE_RETURN"),
        "final_before": total("SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN") > 0,
        "returns": total("RETURN_A_RESPONSE") > 0,
        "after": total("NUMBER_OF_RESPONSE_AFTER_RETURN"),
        "final_after": total("SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN") > 0,
    }


def indexed(rows, index):
    return pb_utils.InferenceResponse([pb_utils.Tensor("INDEX", np.full((rows, 1), index, dtype=np.uint16))])


def send_some(sender, rows, count, final, base):
    for i in range(count):
        sender.send(indexed(rows, base + i))
    if final:
        sender.send(flags=FINAL)


def uses_sender(p):
    return p["before"] or p["after"] or p["final_before"] or p["final_after"]


def prepare(requests):
    plans = [plan_of(r) for r in requests]
    senders = [r.get_response_sender() if uses_sender(p) else None for r, p in zip(requests, plans)]
    for p, s in zip(plans, senders):
        if s is not None:
            send_some(s, p["rows"], p["before"], p["final_before"], 1000)
    returned = [indexed(p["rows"], 0) if p["returns"] else None for p in plans]
    return plans, senders, (None if all(r is None for r in returned) else returned)


def later(plans, senders):
    for p, s in zip(plans, senders):
        if s is not None:
            send_some(s, p["rows"], p["after"], p["final_after"], 2000)
`;

/** execute on the stub's main thread; the after-return sends from a thread of the model's. */
export const SENDER_SYNC = `${COMMON}

class TritonPythonModel:
    def execute(self, requests):
        plans, senders, returned = prepare(requests)

        def afterwards():
            time.sleep(0.3)
            later(plans, senders)

        threading.Thread(target=afterwards, daemon=True).start()
        return returned
`;

/** async execute; the after-return sends from a task on the model's event loop. */
export const SENDER_ASYNC = `${COMMON}

class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()

    async def execute(self, requests):
        plans, senders, returned = prepare(requests)

        async def afterwards():
            await asyncio.sleep(0.3)
            later(plans, senders)

        task = asyncio.create_task(afterwards())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return returned
`;

/**
 * A plain model that misuses its response sender on purpose and answers, as
 * BYTES, what each misuse raised (Triton's texts): the misuses before its one
 * response in that response, the ones after it in the next request's.
 */
export const SENDER_MISUSE_CONFIG = `name: "sender_misuse"
backend: "python"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_STRING, dims: [ -1 ] } ]
`;

export const SENDER_MISUSE = `import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def raised(call):
    try:
        call()
        return "no error"
    except Exception as e:
        return str(e)


def texts(items):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([t.encode() for t in items], dtype=np.object_))])


class TritonPythonModel:
    def initialize(self, args):
        self.after = []

    def execute(self, requests):
        for request in requests:
            s = request.get_response_sender()
            before = [raised(lambda: s.send(flags=2)), raised(lambda: s.send(None, 0)), raised(lambda: s.send(flags=FINAL))]
            one = texts(before + self.after)
            s.send(one)
            self.after = [raised(lambda: s.send(one)), "then final: " + raised(lambda: s.send(flags=FINAL)), raised(lambda: s.send(flags=FINAL))]
        return None
`;
