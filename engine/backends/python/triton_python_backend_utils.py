# Over 300 lines: it mirrors Triton's one pb_utils module, which models import whole.
# This project's own `triton_python_backend_utils` (imported by models as
# `pb_utils`), written from Triton's documented Python-backend API. CPU only:
# tensors are numpy arrays; the stub (stub.py) moves them to and from the
# engine. Anything of Triton's API not here raises TritonModelException with
# an UNSUPPORTED message when called.
import base64
import enum
import json
import sys
import threading

import numpy as np

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1

# The stub installs its channel here (send a frame, run a BLS request).
_channel = None


class TritonError(Exception):
    """An error with one of Triton's codes (TRITONSERVER_Error_Code order)."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    _NAMES = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED"]

    def __init__(self, message, code=INTERNAL):
        message = _str(message)
        super().__init__(message)
        self._message = str(message)
        self._code = int(code)

    def message(self):
        return self._message

    def code(self):
        return self._code

    def code_name(self):
        return self._NAMES[self._code] if 0 <= self._code < len(self._NAMES) else "UNKNOWN"


class TritonModelException(Exception):
    """Raised by pb_utils calls that fail (Triton raises this from its C++ side)."""

    def message(self):
        return str(self)


def _unsupported(what):
    raise TritonModelException(f"UNSUPPORTED: {what} is not supported by this engine's python backend")


def _str(value, what="argument"):
    """A str where Triton's C++ binding takes one: bytes are accepted and decoded as UTF-8, as pybind11 does."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    if isinstance(value, np.str_):
        return str(value)
    return value


def _typed(value, types, what):
    """Triton's binding refuses an argument of the wrong type (None included) with TypeError, as pybind11 does."""
    if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
        raise TypeError(f"{what}: incompatible argument type {type(value).__name__}")
    return value


def _name(value, what):
    return _typed(_str(value), (str,), what)


def _tensor_list(values, what):
    """A list of Tensors: None is a TypeError; a None (or non-Tensor) element a TritonModelException, as in Triton."""
    if values is None or isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{what}: expected a list of pb_utils.Tensor, got {type(values).__name__}")
    out = list(values)
    for t in out:
        if not isinstance(t, Tensor):
            raise TritonModelException(f"{what}: expected pb_utils.Tensor objects, got {type(t).__name__}")
    return out


def _parameters_json(parameters):
    """Triton's checks of a parameters dict (keys str; values bool, int or str), as JSON text; a str passes as given."""
    if parameters is None:
        return "{}"
    if isinstance(parameters, str):
        return parameters
    if not isinstance(parameters, dict):
        raise TritonModelException(f"Expect dict, got {type(parameters)}")
    for k, v in parameters.items():
        if not isinstance(k, str):
            raise TritonModelException(f"Expect parameters keys to have type str, found type {type(k)}")
        if not isinstance(v, (bool, int, str)):
            raise TritonModelException(f"Expect parameters values to have type bool/int/str, found type {type(v)}")
    return json.dumps(parameters)


# TRITONSERVER_DataType values and their numpy types.
_TRITON_TYPES = [
    ("INVALID", None), ("BOOL", np.bool_), ("UINT8", np.uint8), ("UINT16", np.uint16), ("UINT32", np.uint32),
    ("UINT64", np.uint64), ("INT8", np.int8), ("INT16", np.int16), ("INT32", np.int32), ("INT64", np.int64),
    ("FP16", np.float16), ("FP32", np.float32), ("FP64", np.float64), ("BYTES", np.object_), ("BF16", None),
]
_NAME_TO_NP = {n: t for n, t in _TRITON_TYPES if t is not None}


def triton_string_to_numpy(triton_type_string):
    """'TYPE_FP32' -> np.float32 (TYPE_STRING -> np.object_)."""
    name = triton_type_string[5:] if triton_type_string.startswith("TYPE_") else triton_type_string
    if name == "STRING":
        name = "BYTES"
    return _NAME_TO_NP.get(name)


def triton_to_numpy_type(data_type):
    """A TRITONSERVER_DataType value -> numpy type."""
    if 0 <= data_type < len(_TRITON_TYPES):
        return _TRITON_TYPES[data_type][1]
    return None


def numpy_to_triton_type(data_type):
    """A numpy type -> its TRITONSERVER_DataType value (None when Triton has none)."""
    dt = np.dtype(data_type)
    if dt.kind in ("O", "S", "U"):
        return 13
    for i, (_, t) in enumerate(_TRITON_TYPES):
        if t is not None and t is not np.object_ and np.dtype(t) == dt:
            return i
    return None


def _wire_datatype(arr):
    dt = arr.dtype
    if dt.kind in ("O", "S", "U"):
        return "BYTES"
    for n, t in _TRITON_TYPES:
        if t is not None and t is not np.object_ and np.dtype(t) == dt:
            return n
    raise TritonModelException(f"numpy dtype {dt} has no Triton datatype")


def serialize_byte_tensor(input_tensor):
    """Flatten a BYTES array to Triton's wire form (4-byte little-endian length, then bytes), as a 0-d object array."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.object_)
    parts = []
    for obj in np.nditer(input_tensor, flags=["refs_ok"], order="C"):
        item = obj.item()
        b = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts.append(len(b).to_bytes(4, "little"))
        parts.append(b)
    return np.asarray(b"".join(parts), dtype=np.object_)


def deserialize_bytes_tensor(encoded_tensor):
    """Triton's wire form -> 1-D object array of bytes."""
    buf = encoded_tensor if isinstance(encoded_tensor, (bytes, bytearray, memoryview)) else bytes(encoded_tensor)
    out, off, n = [], 0, len(buf)
    while off < n:
        ln = int.from_bytes(buf[off:off + 4], "little")
        off += 4
        out.append(bytes(buf[off:off + ln]))
        off += ln
    return np.array(out, dtype=np.object_)


class Tensor:
    """A named CPU tensor over a numpy array."""

    def __init__(self, name, data, dtype=None):
        name = _name(name, "Tensor name")
        if data is None:
            raise TypeError(f"tensor '{name}': expected a numpy array, got None")
        if not isinstance(data, np.ndarray):
            raise TritonModelException(f"tensor '{name}': expected a numpy array, got {type(data).__name__}")
        self._name = name
        self._data = data

    def name(self):
        return self._name

    def as_numpy(self):
        return self._data

    def shape(self):
        return list(self._data.shape)

    def triton_dtype(self):
        return numpy_to_triton_type(self._data.dtype)

    def is_cpu(self):
        return True

    def to_dlpack(self):
        return self._data.__dlpack__()

    @staticmethod
    def from_dlpack(name, dlpack_tensor):
        if not isinstance(_str(name), str) or not _str(name) or dlpack_tensor is None:
            raise TritonModelException("from_dlpack needs a tensor name and a DLPack capsule or object")
        try:
            return Tensor(name, np.from_dlpack(dlpack_tensor))
        except Exception as e:  # a CUDA tensor
            raise TritonModelException(f"UNSUPPORTED: DLPack tensor '{name}' is not a CPU tensor ({e})")


class InferenceResponse:
    """A response: output tensors, or an error."""

    def __init__(self, output_tensors=(), error=None, parameters=None):
        self._outputs = _tensor_list(output_tensors, "InferenceResponse output_tensors")
        self._error = error
        self._parameters = _parameters_json(parameters)

    def output_tensors(self):
        return self._outputs

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        return self._parameters


class InferenceResponseSender:
    """Sends a request's responses, from any thread. A decoupled model sends any
    number, the last with the final flag; a plain one sends exactly one (Triton's
    rules and texts: flags 0 or FINAL, a response with flags 0, at most one
    response and no final flag before it for a plain model, nothing once closed)."""

    def __init__(self, seq, index, decoupled=True):
        self._seq = seq
        self._index = index
        self._decoupled = decoupled
        self._closed = False
        self._sent = 0
        self._lock = threading.Lock()

    def _count(self, response, flags):
        """Check a send (or a response returned from execute, with the final flag) and count it."""
        if flags != TRITONSERVER_RESPONSE_COMPLETE_FINAL and flags != 0:
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags == 0 and response is None:
            raise TritonModelException("Inference Response object must be provided when the response flags is set to zero.")
        with self._lock:
            if not self._decoupled:
                if response is not None and self._sent > 0:
                    raise TritonModelException("Unable to send response. Non-decoupled model cannot send more than one response.")
                if response is None and flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL and self._sent == 0:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send complete final before sending a response.")
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            if flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                self._closed = True
            self._sent += 1

    def send(self, response=None, flags=0):
        self._count(response, flags)
        _channel.send_response(self._seq, self._index, response, flags)

    def _close(self):
        """The engine ended the request (execute raised): later sends raise."""
        with self._lock:
            self._closed = True

    def is_cancelled(self):
        return _channel.is_cancelled(self._seq, self._index)


class InferenceRequest:
    """A request the model received, or a BLS request it builds (model_name=..., inputs=..., requested_output_names=...)."""

    def __init__(self, model_name, inputs, requested_output_names, model_version=-1, correlation_id=0,
                 request_id="", flags=0, timeout=0, preferred_memory=None, trace=None, parameters=None):
        # Triton's binding: the three named arguments are required, each argument typed, an unknown keyword a TypeError.
        self._model_name = _name(model_name, "InferenceRequest model_name")
        self._inputs = _tensor_list(inputs, "InferenceRequest inputs")
        if requested_output_names is None or isinstance(requested_output_names, (str, bytes)):
            raise TypeError("InferenceRequest requested_output_names: expected a list of str")
        self._requested = [_name(n, "InferenceRequest requested_output_names") for n in requested_output_names]
        self._model_version = _typed(model_version, (int,), "InferenceRequest model_version")
        self._correlation_id = _typed(_str(correlation_id), (int, str), "InferenceRequest correlation_id")
        self._request_id = _name(request_id, "InferenceRequest request_id")
        self._flags = _typed(flags, (int,), "InferenceRequest flags")
        self._timeout = _typed(timeout, (int,), "InferenceRequest timeout")
        self._parameters = _parameters_json(parameters)
        self._sender = None
        self._cancel_key = None  # (batch, index) of a request the model received

    def inputs(self):
        return self._inputs

    def request_id(self):
        return self._request_id

    def correlation_id(self):
        return self._correlation_id

    def flags(self):
        return self._flags

    def timeout(self):
        return self._timeout

    def model_name(self):
        return self._model_name

    def requested_output_names(self):
        return self._requested

    def parameters(self):
        return self._parameters

    def is_cancelled(self):
        return self._cancel_key is not None and _channel.is_cancelled(*self._cancel_key)

    def get_response_sender(self):
        if self._sender is None:
            raise TritonModelException("get_response_sender is only available on a request the model received")
        return self._sender

    def set_release_flags(self, flags):
        pass

    def exec(self, decoupled=False):
        """Run on the engine: the response, or with decoupled=True an iterator of every response (the last one final)."""
        return _channel.bls_stream(self) if decoupled else _channel.bls(self)

    async def async_exec(self, decoupled=False):
        """exec() awaited; with decoupled=True the iterator (plain or async) once the first response is in."""
        return await (_channel.bls_stream_async(self) if decoupled else _channel.bls_async(self))


def get_input_tensor_by_name(inference_request, name):
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response, name):
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def get_input_config_by_name(model_config, name):
    for t in model_config.get("input", []):
        if t.get("name") == name:
            return t
    return None


def get_output_config_by_name(model_config, name):
    for t in model_config.get("output", []):
        if t.get("name") == name:
            return t
    return None


def using_decoupled_model_transaction_policy(model_config):
    return bool((model_config.get("model_transaction_policy") or {}).get("decoupled", False))


class LogLevel(enum.Enum):
    """Triton's pb_utils.LogLevel: a level is one of these, not an int."""

    INFO = "I"
    WARNING = "W"
    ERROR = "E"
    VERBOSE = "V"


class Logger:
    """Lines go to the engine's log, tagged with the model's name."""

    INFO, WARNING, ERROR, VERBOSE = LogLevel.INFO, LogLevel.WARNING, LogLevel.ERROR, LogLevel.VERBOSE

    @staticmethod
    def log(message, level=LogLevel.INFO):
        _typed(message, (str,), "Logger message")
        _typed(level, (LogLevel,), "Logger level")
        sys.stderr.write(f"{level.value} {message}\n")
        sys.stderr.flush()

    @staticmethod
    def log_info(message):
        Logger.log(message, Logger.INFO)

    @staticmethod
    def log_warn(message):
        Logger.log(message, Logger.WARNING)

    @staticmethod
    def log_error(message):
        Logger.log(message, Logger.ERROR)

    @staticmethod
    def log_verbose(message):
        Logger.log(message, Logger.VERBOSE)



class ModelConfig:
    """The config handed to auto_complete_config (its edits are not applied by this engine yet)."""

    def __init__(self, model_config):
        self._config = model_config if isinstance(model_config, dict) else json.loads(model_config)

    def as_dict(self):
        return self._config

    def max_batch_size(self):
        return self._config.get("max_batch_size", 0)

    def set_max_batch_size(self, n):
        self._config["max_batch_size"] = n

    def set_dynamic_batching(self):
        self._config.setdefault("dynamic_batching", {})

    def add_input(self, inp):
        self._config.setdefault("input", []).append(inp)

    def add_output(self, out):
        self._config.setdefault("output", []).append(out)

    def set_model_transaction_policy(self, policy):
        self._config["model_transaction_policy"] = policy


class MetricFamily:
    COUNTER, GAUGE, HISTOGRAM = 0, 1, 2

    def __init__(self, *args, **kwargs):
        _unsupported("custom metrics (pb_utils.MetricFamily)")


def load_model(model_name, config="", files=None):
    """Load (or reload) model_name on the engine, as the repository API's load: config a JSON
    ModelConfig, files {"file:<version>/<name>": bytes} (they need a config, as in Triton)."""
    name = _name(model_name, "load_model model_name")
    frame = {"op": "load", "model": name, "config": _typed(_str(config), (str,), "load_model config")}
    if files:
        frame["files"] = {_name(k, "load_model files key"): base64.b64encode(bytes(v)).decode("ascii") for k, v in files.items()}
    _channel.model_control(frame)


def unload_model(model_name, unload_dependents=False):
    """Unload model_name (and, with unload_dependents, the models that depend on it)."""
    _channel.model_control({"op": "unload", "model": _name(model_name, "unload_model model_name"),
                            "unload_dependents": bool(unload_dependents)})


def is_model_ready(model_name, model_version=""):
    """Whether model_name (version model_version, "" for any) is loaded and ready."""
    m = _channel.model_control({"op": "is_ready", "model": _name(model_name, "is_model_ready model_name"),
                                "version": _name(model_version, "is_model_ready model_version")})
    return bool(m.get("ready"))
