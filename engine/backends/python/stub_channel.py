# What pb_utils reaches the engine through, inside the stub (stub.py):
# responses a decoupled model sends from any thread or task, BLS calls
# (exec/async_exec, decoupled or not) and their replies, and the client's
# cancellations. Frames go out through stub.py's write_frame (one lock); the
# reader thread calls reply() and cancel(), model threads the rest.
import asyncio
import json
import os
import queue
import threading

import stub_frames as F
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
_SAFE_INT = 2 ** 53


def wire_params(parameters_json):
    """A response's parameters (pb_utils keeps them as JSON text) for the frame: big ints as {int64: text}."""
    params = json.loads(parameters_json) if parameters_json else {}
    if not isinstance(params, dict):
        return {}
    return {k: ({"int64": str(v)} if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= _SAFE_INT else v)
            for k, v in params.items()}


def _params_from_wire(p):
    return {k: (int(v["int64"]) if isinstance(v, dict) and "int64" in v else v) for k, v in (p or {}).items()}


class Channel:
    def __init__(self, reader, writer, write_frame):
        self.reader = reader
        self.writer = writer
        self.write_frame = write_frame
        self.pending = {}
        self.lock = threading.Lock()
        self.next_bid = 0
        self.cancelled = set()  # (seq, index) of requests their client cancelled
        self.model = None  # set once initialize returned: is_ready() needs it
        self.model_dir = ""
        self.instance_name = ""
        # Set while initialize, finalize or auto_complete_config runs: BLS is refused then, as in Triton.
        self.bls_blocked = False

    # ---- responses ----

    def response_frame(self, response):
        if response is None:
            return {}
        if response.has_error():
            err = response.error()
            code = err.code_name() if isinstance(err, pb_utils.TritonError) else "INTERNAL"
            return {"error": {"message": err.message() if hasattr(err, "message") else str(err), "code": code}}
        frame = {"outputs": self.writer.encode([(t.name(), t.as_numpy()) for t in response.output_tensors()])}
        params = wire_params(response.parameters())
        if params:
            frame["parameters"] = params
        return frame

    def send_response(self, seq, index, response, flags):
        frame = {"t": F.RESP, "seq": seq, "index": index, "flags": flags}
        frame.update(self.response_frame(response))
        frame["has_response"] = response is not None
        if flags & FINAL:
            self.cancelled.discard((seq, index))
        self.write_frame(frame)

    # ---- cancellation ----

    def cancel(self, seq, index):
        self.cancelled.add((seq, index))

    def is_cancelled(self, seq, index):
        return (seq, index) in self.cancelled

    def forget_batch(self, seq, indices):
        for i in indices:
            self.cancelled.discard((seq, i))

    # ---- model control (pb_utils.load_model, unload_model, is_model_ready) ----

    def model_control(self, frame):
        """Send a model_control frame and wait for its reply (allowed in initialize too, as in Triton)."""
        done = threading.Event()
        box = []
        with self.lock:
            self.next_bid += 1
            cid = self.next_bid
            self.pending[("mc", cid)] = lambda m: (box.append(m), done.set())
        self.write_frame(dict(frame, t=F.MODEL_CONTROL, cid=cid))
        done.wait()
        m = box[0]
        if m.get("error") is not None:
            raise pb_utils.TritonModelException(m["error"])
        return m

    def model_control_reply(self, m):
        with self.lock:
            deliver = self.pending.pop(("mc", m["cid"]), None)
        if deliver:
            deliver(m)

    # ---- BLS ----

    def _start_bls(self, req, deliver, decoupled):
        if self.bls_blocked:
            raise pb_utils.TritonModelException("BLS is only supported during the 'execute' function.")
        with self.lock:
            self.next_bid += 1
            bid = self.next_bid
            self.pending[bid] = deliver
        frame = {
            "t": F.BLS, "bid": bid, "model": req.model_name(), "version": req._model_version,
            "id": req.request_id(), "outputs": req.requested_output_names(), "parameters": json.loads(req.parameters()),
            "inputs": self.writer.encode([(t.name(), t.as_numpy()) for t in req.inputs()]),
        }
        if decoupled:
            frame["decoupled"] = True
        if req.timeout():
            frame["timeout"] = int(req.timeout())
        self.write_frame(frame)
        return bid

    def reply(self, m):
        final = bool(m.get("flags", FINAL) & FINAL)
        with self.lock:
            deliver = self.pending.pop(m["bid"], None) if final else self.pending.get(m["bid"])
        if deliver is None:
            return
        try:
            if "error" in m:
                code = pb_utils.TritonError._NAMES.index(m.get("code", "INTERNAL")) if m.get("code") in pb_utils.TritonError._NAMES else 1
                resp = pb_utils.InferenceResponse(error=pb_utils.TritonError(m["error"], code))
            else:
                resp = pb_utils.InferenceResponse([pb_utils.Tensor(w["name"], self.reader.tensor(w)) for w in m["outputs"]],
                                                  parameters=_params_from_wire(m.get("parameters")))
                for key in {w["key"] for w in m["outputs"] if w.get("own")}:
                    os.unlink("/dev/shm" + key)
        except Exception as e:
            resp = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"BLS reply unreadable: {e}"))
        deliver(resp, final)

    def bls(self, req):
        done = threading.Event()
        box = []
        self._start_bls(req, lambda r, _final: (box.append(r), done.set()), False)
        done.wait()
        return box[0]

    async def bls_async(self, req):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._start_bls(req, lambda r, _final: loop.call_soon_threadsafe(fut.set_result, r), False)
        return await fut

    def cancel_bls(self, bid):
        with self.lock:
            open_call = bid in self.pending
        if open_call:
            self.write_frame({"t": F.BLS_CANCEL, "bid": bid})

    def bls_stream(self, req):
        it = ResponseIterator(self)
        it.bid = self._start_bls(req, it.put, True)
        return it

    async def bls_stream_async(self, req):
        """As Triton: the iterator once the first response is in."""
        it = ResponseIterator(self, asyncio.get_running_loop())
        it.bid = self._start_bls(req, it.put, True)
        await it.first
        return it


class ResponseIterator:
    """A decoupled BLS call's responses, in order, the last one final (maybe empty).
    Iterate with `for` (blocks for the next) or `async for`; iterating again replays them."""

    def __init__(self, channel, loop=None):
        self._channel = channel
        self.bid = None
        self._queue = queue.Queue()
        self._seen = []
        self._done = False
        self._idx = 0
        self._loop = loop
        self.first = loop.create_future() if loop else None

    def put(self, response, final):
        self._queue.put((response, final))
        if self.first is not None:
            self._loop.call_soon_threadsafe(lambda: self.first.done() or self.first.set_result(None))

    def _take(self, response, final):
        self._seen.append(response)
        self._done = final
        self._idx = len(self._seen)
        return response

    def __iter__(self):
        if self._done and self._idx >= len(self._seen):
            self._idx = 0
        return self

    def __next__(self):
        if self._idx < len(self._seen):
            self._idx += 1
            return self._seen[self._idx - 1]
        if self._done:
            raise StopIteration
        return self._take(*self._queue.get())

    def __aiter__(self):
        return self.__iter__()

    async def __anext__(self):
        if self._idx < len(self._seen):
            self._idx += 1
            return self._seen[self._idx - 1]
        if self._done:
            raise StopAsyncIteration
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            item = await asyncio.get_running_loop().run_in_executor(None, self._queue.get)
        return self._take(*item)

    def cancel(self):
        """Cancel the call: the called model's request.is_cancelled() turns true; the responses still come, the last final."""
        if self.bid is not None and not self._done:
            self._channel.cancel_bls(self.bid)
