# The python backend's stub: one process per model instance, hosting an
# unmodified Triton `model.py` (class TritonPythonModel). The engine talks to
# it over fd 3 only (4-byte little-endian length + UTF-8 JSON frames); the
# model's stdout/stderr go to the engine's log. Tensor bytes travel in POSIX
# shm (/dev/shm) or, when small, inline in the frame.
#
# Threads: the main thread runs initialize/execute/finalize, one at a time.
# A reader thread demultiplexes frames: work goes to the main thread's queue,
# BLS replies wake their waiters (so a BLS call inside execute cannot
# deadlock). Frames are written under one lock from any thread (decoupled
# response senders).
import asyncio
import base64
import importlib.util
import inspect
import json
import mmap
import os
import queue
import sys
import threading
import traceback

CHANNEL_FD = 3
INLINE_MAX = 1024
ALIGN = 64
_write_lock = threading.Lock()


def write_frame(obj):
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    buf = memoryview(len(data).to_bytes(4, "little") + data)
    with _write_lock:
        while buf:
            n = os.write(CHANNEL_FD, buf)
            buf = buf[n:]


def read_exact(n):
    chunks, left = [], n
    while left:
        b = os.read(CHANNEL_FD, left)
        if not b:
            return None
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def read_frame():
    head = read_exact(4)
    if head is None:
        return None
    body = read_exact(int.from_bytes(head, "little"))
    return None if body is None else json.loads(body)


try:
    import numpy as np
except Exception as e:  # the engine reports this reason verbatim
    write_frame({"t": "init_error", "kind": "numpy", "message": f"{type(e).__name__}: {e}"})
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_python_backend_utils as pb_utils  # noqa: E402

NP_OF = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
}


class ShmReader:
    """Maps the engine's input arena once (re-mapped when it grows); maps other objects per use."""

    def __init__(self):
        self.arenas = {}

    def arena(self, key, end):
        cur = self.arenas.get(key)
        if cur is None or len(cur) < end:
            fd = os.open("/dev/shm" + key, os.O_RDONLY)
            try:
                cur = mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
            self.arenas[key] = cur
        return cur

    def tensor(self, w):
        """A wire tensor -> a writable numpy array the model owns."""
        dt, shape = w["datatype"], w["shape"]
        if "b64" in w:
            raw = bytearray(base64.b64decode(w["b64"]))
            return decode(raw, dt, shape)
        size, off = w["size"], w["offset"]
        if w.get("cow") and dt != "BYTES":
            # A client's registered region: a private copy-on-write mapping, so the
            # model may write in place without a copy and without touching the client's bytes.
            page = mmap.ALLOCATIONGRANULARITY
            base = off - off % page
            fd = os.open("/dev/shm" + w["key"], os.O_RDONLY)
            try:
                mm = mmap.mmap(fd, size + (off - base), access=mmap.ACCESS_COPY, offset=base)
            finally:
                os.close(fd)
            if size == 0:
                return np.zeros(shape, dtype=NP_OF[dt])
            return np.frombuffer(mm, dtype=NP_OF[dt], count=size // np.dtype(NP_OF[dt]).itemsize, offset=off - base).reshape(shape)
        if w.get("own"):
            fd = os.open("/dev/shm" + w["key"], os.O_RDONLY)
            try:
                mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if os.fstat(fd).st_size else None
            finally:
                os.close(fd)
            raw = bytearray(mm[off:off + size]) if mm else bytearray()
            return decode(raw, dt, shape)
        mm = self.arena(w["key"], off + size)
        return decode(bytearray(mm[off:off + size]), dt, shape)


def decode(raw, dt, shape):
    if dt == "BYTES":
        return pb_utils.deserialize_bytes_tensor(bytes(raw)).reshape(shape)
    if dt not in NP_OF:
        raise pb_utils.TritonModelException(f"UNSUPPORTED: datatype {dt} has no numpy type")
    return np.frombuffer(raw, dtype=NP_OF[dt]).reshape(shape)


class Writer:
    """Encodes numpy outputs: small ones inline, the rest in one new shm object per frame (the engine unlinks it)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.n = 0
        self.lock = threading.Lock()

    def encode(self, tensors):
        """[(name, ndarray)] -> wire tensors."""
        items, total = [], 0
        for name, arr in tensors:
            if not isinstance(arr, np.ndarray):
                raise pb_utils.TritonModelException(f"output '{name}' is not a numpy array")
            dt = pb_utils._wire_datatype(arr)
            if dt == "BYTES":
                data = bytes(pb_utils.serialize_byte_tensor(arr).item()) if arr.size else b""
            else:
                data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
            items.append((name, dt, list(arr.shape), data))
            if len(data) > INLINE_MAX:
                total += (len(data) + ALIGN - 1) // ALIGN * ALIGN
        out, mm, key, off = [], None, None, 0
        if total:
            with self.lock:
                self.n += 1
                key = f"{self.prefix}.o{self.n}"
            fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            try:
                os.ftruncate(fd, total)
                mm = mmap.mmap(fd, total)
            finally:
                os.close(fd)
        for name, dt, shape, data in items:
            n = len(data)
            if n <= INLINE_MAX:
                out.append({"name": name, "datatype": dt, "shape": shape, "b64": base64.b64encode(bytes(data)).decode("ascii")})
                continue
            mm[off:off + n] = data if isinstance(data, bytes) else data.tobytes()
            out.append({"name": name, "datatype": dt, "shape": shape, "key": key, "offset": off, "size": n})
            off += (n + ALIGN - 1) // ALIGN * ALIGN
        if mm is not None:
            mm.close()
        return out


def where(exc, model_dir):
    """'Type: message (add_sub/1/model.py:12)': the innermost frame in the model's own files."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if os.path.abspath(f.filename).startswith(model_dir)] or frames
    loc = ""
    if mine:
        f = mine[-1]
        loc = f" ({os.path.relpath(f.filename, os.path.dirname(model_dir))}:{f.lineno})"
    return f"{type(exc).__name__}: {exc}{loc}"


class Channel:
    """What pb_utils reaches through: decoupled sends and BLS calls."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.pending = {}
        self.lock = threading.Lock()
        self.next_bid = 0

    def response_frame(self, response):
        if response is None:
            return {}
        if response.has_error():
            err = response.error()
            code = err.code_name() if isinstance(err, pb_utils.TritonError) else "INTERNAL"
            return {"error": {"message": err.message() if hasattr(err, "message") else str(err), "code": code}}
        return {"outputs": self.writer.encode([(t.name(), t.as_numpy()) for t in response.output_tensors()])}

    def send_response(self, seq, index, response, flags):
        frame = {"t": "resp", "seq": seq, "index": index, "flags": flags}
        frame.update(self.response_frame(response))
        frame["has_response"] = response is not None
        write_frame(frame)

    def _start_bls(self, req, deliver):
        with self.lock:
            self.next_bid += 1
            bid = self.next_bid
            self.pending[bid] = deliver
        write_frame({
            "t": "bls", "bid": bid, "model": req.model_name(), "version": req._model_version,
            "id": req.request_id(), "outputs": req.requested_output_names(), "parameters": json.loads(req.parameters()),
            "inputs": self.writer.encode([(t.name(), t.as_numpy()) for t in req.inputs()]),
        })

    def reply(self, m):
        with self.lock:
            deliver = self.pending.pop(m["bid"], None)
        if deliver is None:
            return
        try:
            if "error" in m:
                code = pb_utils.TritonError._NAMES.index(m.get("code", "INTERNAL")) if m.get("code") in pb_utils.TritonError._NAMES else 1
                resp = pb_utils.InferenceResponse(error=pb_utils.TritonError(m["error"], code))
            else:
                resp = pb_utils.InferenceResponse([pb_utils.Tensor(w["name"], self.reader.tensor(w)) for w in m["outputs"]])
                for key in {w["key"] for w in m["outputs"] if w.get("own")}:
                    os.unlink("/dev/shm" + key)
        except Exception as e:
            resp = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"BLS reply unreadable: {e}"))
        deliver(resp)

    def bls(self, req):
        done = threading.Event()
        box = []
        self._start_bls(req, lambda r: (box.append(r), done.set()))
        done.wait()
        return box[0]

    async def bls_async(self, req):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._start_bls(req, lambda r: loop.call_soon_threadsafe(fut.set_result, r))
        return await fut


def reader_loop(work, channel):
    while True:
        m = read_frame()
        if m is None:  # the engine went away: nothing left to serve
            os._exit(0)
        if m["t"] == "bls_reply":
            channel.reply(m)
        else:
            work.put(m)


def load_model_class(path):
    spec = importlib.util.spec_from_file_location("model", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["model"] = mod
    spec.loader.exec_module(mod)
    return mod.TritonPythonModel


def main():
    model_file = sys.argv[1]
    prefix = sys.argv[2]
    sys.path.insert(0, os.path.dirname(os.path.abspath(model_file)))
    reader, writer = ShmReader(), Writer(prefix)
    channel = Channel(reader, writer)
    pb_utils._channel = channel
    work = queue.Queue()
    threading.Thread(target=reader_loop, args=(work, channel), daemon=True).start()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    model, model_dir, decoupled, cls = None, "", False, None
    while True:
        m = work.get()
        t = m["t"]
        if t == "autocomplete":
            # Triton calls the static auto_complete_config before initialize.
            try:
                cls = load_model_class(model_file)
                done = None
                if hasattr(cls, "auto_complete_config"):
                    done = cls.auto_complete_config(pb_utils.ModelConfig(m["config"])).as_dict()
                write_frame({"t": "config", "config": done})
            except BaseException as e:
                write_frame({"t": "init_error", "kind": "python", "message": where(e, os.path.abspath(m["model_dir"]))})
        elif t == "init":
            args = m["args"]
            model_dir = os.path.abspath(args["model_repository"])
            decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))
            try:
                model = (cls or load_model_class(model_file))()
                if hasattr(model, "initialize"):
                    r = model.initialize(args)
                    if inspect.isawaitable(r):
                        loop.run_until_complete(r)
                write_frame({"t": "ready"})
            except BaseException as e:
                write_frame({"t": "init_error", "kind": "python", "message": where(e, model_dir)})
        elif t == "exec":
            run_execute(m, model, model_dir, decoupled, reader, channel, loop)
        elif t == "fini":
            try:
                if model is not None and hasattr(model, "finalize"):
                    model.finalize()
            except BaseException as e:
                sys.stderr.write(f"finalize failed: {where(e, model_dir)}\n")
            write_frame({"t": "fini_done"})
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


def run_execute(m, model, model_dir, decoupled, reader, channel, loop):
    seq = m["seq"]
    try:
        requests = []
        for i, r in enumerate(m["requests"]):
            inputs = [pb_utils.Tensor(w["name"], reader.tensor(w)) for w in r["inputs"]]
            req = pb_utils.InferenceRequest(
                inputs=inputs, requested_output_names=r["outputs"], request_id=r.get("id", ""),
                correlation_id=r.get("correlation_id", 0), parameters=json.dumps(r.get("parameters", {})),
                model_name=m.get("model"),
            )
            req._sender = pb_utils.InferenceResponseSender(seq, i)
            requests.append(req)
        result = model.execute(requests)
        if inspect.isawaitable(result):
            result = loop.run_until_complete(result)
        if decoupled:
            write_frame({"t": "exec_done", "seq": seq})
            return
        if result is None or len(result) != len(requests):
            got = "None" if result is None else f"{len(result)} responses"
            raise pb_utils.TritonModelException(f"execute returned {got} for {len(requests)} requests")
        frames = []
        for resp in result:
            f = channel.response_frame(resp)
            if not f:
                f = {"error": {"message": "execute returned None for a request", "code": "INTERNAL"}}
            frames.append(f)
        write_frame({"t": "exec_done", "seq": seq, "responses": frames})
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        write_frame({"t": "exec_done", "seq": seq, "error": where(e, model_dir)})


if __name__ == "__main__":
    main()
