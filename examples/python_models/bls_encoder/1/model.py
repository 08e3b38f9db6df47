# A BLS model: execute() runs another model of the server (the ONNX encoder)
# with pb_utils.InferenceRequest(...).exec() and post-processes its output.
# Set parameter "mode" to "async" in a request to go through async_exec().
import asyncio
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.config = json.loads(args["model_config"])

    def _encoder_request(self, pixels):
        return pb_utils.InferenceRequest(
            model_name="clip_encoder_model",
            requested_output_names=["image_embeds"],
            inputs=[pb_utils.Tensor("pixel_values", pixels)],
        )

    def _answer(self, response):
        if response.has_error():
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"encoder failed: {response.error().message()}"))
        emb = pb_utils.get_output_tensor_by_name(response, "image_embeds").as_numpy()
        norm = np.linalg.norm(emb, axis=1).astype(np.float32)
        return pb_utils.InferenceResponse([pb_utils.Tensor("EMBEDDING", emb), pb_utils.Tensor("NORM", norm)])

    def execute(self, requests):
        out = []
        for request in requests:
            pixels = pb_utils.get_input_tensor_by_name(request, "PIXELS").as_numpy()
            pixels /= 255.0  # inputs are writable, as under Triton
            mode = json.loads(request.parameters()).get("mode", "sync")
            if mode == "async":
                async def run():
                    return await self._encoder_request(pixels).async_exec()
                response = asyncio.run(run())
            else:
                response = self._encoder_request(pixels).exec()
            out.append(self._answer(response))
        return out
