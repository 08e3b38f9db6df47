# image_preprocess_model: numpy preprocessing in Triton's python-backend
# shape. Encoded images (JPEG/PNG) are decoded with Pillow when it is
# installed: shortest side to 224 (bicubic), centre crop, RGB. With
# parameter input_format = "raw_rgb" the input is 224*224*3 RGB bytes (HWC)
# and Pillow is not needed. Then CLIP's mean/std normalization, CHW layout.
import io
import json

import numpy as np
import triton_python_backend_utils as pb_utils

SIZE = 224
MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        self.format = params.get("input_format", {}).get("string_value", "encoded")
        if self.format not in ("encoded", "raw_rgb"):
            raise pb_utils.TritonModelException(f"input_format must be 'encoded' or 'raw_rgb', got '{self.format}'")
        self.Image = None
        if self.format == "encoded":
            try:
                from PIL import Image
            except ImportError as e:
                raise pb_utils.TritonModelException(
                    f"decoding JPEG/PNG needs Pillow, which this interpreter lacks ({e}); install Pillow "
                    "or set parameter input_format to 'raw_rgb'"
                )
            self.Image = Image

    def decode(self, data):
        if self.format == "raw_rgb":
            if data.size != SIZE * SIZE * 3:
                raise ValueError(f"raw_rgb input must be {SIZE * SIZE * 3} bytes, got {data.size}")
            return data.reshape(SIZE, SIZE, 3)
        img = self.Image.open(io.BytesIO(data.tobytes())).convert("RGB")
        w, h = img.size
        scale = SIZE / min(w, h)
        img = img.resize((max(SIZE, round(w * scale)), max(SIZE, round(h * scale))), self.Image.BICUBIC)
        w, h = img.size
        # Centre crop with an odd margin's extra pixel on the left/top, as sharp's
        # centre gravity does, so this matches the JS model pixel for pixel.
        left, top = (w - SIZE + 1) // 2, (h - SIZE + 1) // 2
        return np.asarray(img.crop((left, top, left + SIZE, top + SIZE)), dtype=np.uint8)

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "image_bytes").as_numpy()
            try:
                hwc = self.decode(data).astype(np.float32)
            except Exception as e:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"invalid image: {e}", pb_utils.TritonError.INVALID_ARG)))
                continue
            chw = ((hwc / 255.0 - MEAN) / STD).transpose(2, 0, 1)
            out = np.ascontiguousarray(chw, dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("preprocessed_tensor", out)]))
        return responses
