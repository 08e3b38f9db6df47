# A decoupled model: execute() returns None at once; a thread per request
# sends the responses through the request's response sender and ends with
# TRITONSERVER_RESPONSE_COMPLETE_FINAL.
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        if not pb_utils.using_decoupled_model_transaction_policy(__import__("json").loads(args["model_config"])):
            raise pb_utils.TritonModelException("decoupled_count needs model_transaction_policy { decoupled: true }")
        self.threads = []

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            sender = request.get_response_sender()
            t = threading.Thread(target=self.stream, args=(n, sender))
            t.start()
            self.threads.append(t)
        return None

    def stream(self, n, sender):
        if n < 0:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("IN must be >= 0", pb_utils.TritonError.INVALID_ARG)))
        for i in range(max(n, 0)):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], dtype=np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for t in self.threads:
            t.join()
