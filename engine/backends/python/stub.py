# The python backend's stub: one process per model instance, hosting an
# unmodified Triton `model.py` (class TritonPythonModel). The engine talks to
# it over fd 3 only (4-byte little-endian length + UTF-8 JSON frames); the
# model's stdout/stderr go to the engine's log. Tensor bytes travel in POSIX
# shm (/dev/shm) or, when small, inline in the frame.
#
# Threads: the main thread runs initialize/execute/finalize, one at a time;
# coroutines (async def execute) run on the model's event loop, a thread of
# its own that lives as long as the stub, so tasks they start outlive the
# call (a decoupled model's async execute runs wholly in the background, as in
# Triton). A reader thread demultiplexes frames: work goes to the main
# thread's queue, BLS replies wake their waiters (so a BLS call inside
# execute cannot deadlock), cancellations mark their request, and a readiness
# question runs the model's is_ready() on a thread of its own. Frames are
# written under one lock from any thread (decoupled response senders).
import asyncio
import importlib.util
import inspect
import json
import os
import queue
import sys
import threading
import traceback

import stub_frames as F  # the frame kinds, shared by name with stub-frames.ts

CHANNEL_FD = 3
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
    write_frame({"t": F.INIT_ERROR, "kind": "numpy", "message": f"{type(e).__name__}: {e}"})
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_python_backend_utils as pb_utils  # noqa: E402

from stub_tensors import ShmReader, Writer  # noqa: E402
from stub_channel import Channel  # noqa: E402


STUB_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def where(exc, model_dir):
    """'Type: message (model 'add_sub' 1/model.py:12)': the model, and the innermost
    line in its own files, relative to its folder. Paths on disk in the message
    lose the repository's and the engine's folders: clients see no paths of the host."""
    model_dir = os.path.abspath(model_dir) if model_dir else ""
    root = model_dir + os.sep if model_dir else None
    model = os.path.basename(model_dir)
    inside = lambda p: root is not None and os.path.abspath(p).startswith(root)  # noqa: E731
    loc = None
    if isinstance(exc, SyntaxError) and exc.filename and inside(exc.filename):
        loc = (exc.filename, exc.lineno)
        text = exc.msg
    else:
        text = str(exc)
        mine = [f for f in traceback.extract_tb(exc.__traceback__) if inside(f.filename)]
        if mine:
            loc = (mine[-1].filename, mine[-1].lineno)
    if root:
        text = text.replace(root, "").replace(os.path.dirname(model_dir) + os.sep, "")
    text = text.replace(STUB_DIR, "")
    at = f" {os.path.relpath(os.path.abspath(loc[0]), model_dir)}:{loc[1]}" if loc else ""
    return f"{type(exc).__name__}: {text} (model '{model}'{at})" if model else f"{type(exc).__name__}: {text}"


def reader_loop(work, channel):
    while True:
        m = read_frame()
        if m is None:  # the engine went away: nothing left to serve
            os._exit(0)
        if m["t"] == F.BLS_REPLY:
            channel.reply(m)
        elif m["t"] == F.MODEL_CONTROL_REPLY:
            channel.model_control_reply(m)
        elif m["t"] == F.CANCEL:
            channel.cancel(m["seq"], m["index"])
        elif m["t"] == F.IS_READY:
            threading.Thread(target=answer_is_ready, args=(channel, m["rid"]), daemon=True).start()
        else:
            work.put(m)


def answer_is_ready(channel, rid):
    """The model's is_ready(): True/False as it says; an exception or a non-bool is "not ready" with the reason."""
    reply = {"t": F.IS_READY_REPLY, "rid": rid, "ready": False}
    try:
        r = channel.model.is_ready()
        if inspect.isawaitable(r):
            r = asyncio.run(r)
        if isinstance(r, (bool, np.bool_)):
            reply["ready"] = bool(r)
        else:
            reply["error"] = f"returned {type(r).__name__} {r!r}, not a bool"
    except BaseException as e:
        reply["error"] = f"raised {where(e, channel.model_dir)}"
    write_frame(reply)


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
    channel = Channel(reader, writer, write_frame)
    pb_utils._channel = channel
    write_frame({"t": F.HELLO})
    work = queue.Queue()
    threading.Thread(target=reader_loop, args=(work, channel), daemon=True).start()
    # The model's event loop runs for the stub's life (as in Triton), so tasks an
    # async execute starts keep running, and sending, after it returns.
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True, name="model-event-loop").start()
    asyncio.set_event_loop(loop)
    model, model_dir, decoupled, cls = None, "", False, None
    while True:
        m = work.get()
        t = m["t"]
        if t == F.AUTOCOMPLETE:
            # Triton calls the static auto_complete_config before initialize.
            try:
                cls = load_model_class(model_file)
                done = None
                if hasattr(cls, "auto_complete_config"):
                    channel.bls_blocked = True
                    try:
                        done = cls.auto_complete_config(pb_utils.ModelConfig(m["config"])).as_dict()
                    finally:
                        channel.bls_blocked = False
                write_frame({"t": F.CONFIG, "config": done})
            except BaseException as e:
                write_frame({"t": F.INIT_ERROR, "kind": "python", "message": where(e, os.path.abspath(m["model_dir"]))})
        elif t == F.INIT:
            args = m["args"]
            model_dir = os.path.abspath(args["model_repository"])
            channel.instance_name = args.get("model_instance_name", "")
            decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))
            try:
                model = (cls or load_model_class(model_file))()
                if hasattr(model, "initialize"):
                    channel.bls_blocked = True
                    try:
                        r = model.initialize(args)
                        if inspect.isawaitable(r):
                            asyncio.run_coroutine_threadsafe(r, loop).result()
                    finally:
                        channel.bls_blocked = False
                channel.model, channel.model_dir = model, model_dir
                write_frame({"t": F.READY, "has_is_ready": callable(getattr(model, "is_ready", None))})
            except BaseException as e:
                write_frame({"t": F.INIT_ERROR, "kind": "python", "message": where(e, model_dir)})
        elif t == F.EXEC:
            run_execute(m, model, model_dir, decoupled, reader, channel, loop)
        elif t == F.FINI:
            channel.bls_blocked = True
            try:
                if model is not None and hasattr(model, "finalize"):
                    model.finalize()
            except BaseException as e:
                sys.stderr.write(f"E finalize failed: {where(e, model_dir)}\n")
            write_frame({"t": F.FINI_DONE})
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


def run_execute(m, model, model_dir, decoupled, reader, channel, loop):
    seq = m["seq"]
    requests = []
    try:
        for i, r in enumerate(m["requests"]):
            inputs = [pb_utils.Tensor(w["name"], reader.tensor(w)) for w in r["inputs"]]
            req = pb_utils.InferenceRequest(
                inputs=inputs, requested_output_names=r["outputs"], request_id=r.get("id", ""),
                correlation_id=r.get("correlation_id", 0), parameters=json.dumps(r.get("parameters", {})),
                model_name=m.get("model"),
            )
            req._sender = pb_utils.InferenceResponseSender(seq, i, decoupled)
            req._cancel_key = (seq, i)
            requests.append(req)
        result = model.execute(requests)
        if inspect.isawaitable(result):
            future = asyncio.run_coroutine_threadsafe(result, loop)
            if decoupled:
                # As in Triton: a decoupled model's async execute runs on in the
                # background; the instance takes the next batch at once.
                future.add_done_callback(lambda f: background_done(f, requests, model_dir))
                write_frame({"t": F.EXEC_DONE, "seq": seq})
                return
            result = future.result()
        if decoupled:
            if result is not None:
                raise ReturnError(f"Python model '{channel.instance_name}' is using the decoupled mode and the execute function must return None.")
            write_frame({"t": F.EXEC_DONE, "seq": seq})
            return
        # A plain model answers each request by returning its response or through
        # its response sender (a None in the list, or None for the whole batch):
        # those requests stay open until the sender's final flag.
        returned = checked_responses(result, requests)
        frames = [None if r is None else channel.response_frame(r) for r in returned]
        channel.forget_batch(seq, [i for i, r in enumerate(returned) if r is not None])
        write_frame({"t": F.EXEC_DONE, "seq": seq, "responses": frames})
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        done = {"t": F.EXEC_DONE, "seq": seq, "error": str(e) if isinstance(e, ReturnError) else where(e, model_dir)}
        if decoupled and isinstance(e, ReturnError):
            done["raw"] = True  # Triton sends this one to the stream as it is
        # As Triton: the engine ends every request still open with the error, so
        # their senders close (a later send raises).
        for req in requests:
            req._sender._close()
        if not decoupled:
            channel.forget_batch(seq, range(len(m["requests"])))
        write_frame(done)


class ReturnError(Exception):
    """What execute returned is not what Triton accepts: the text goes out as it is (Triton's words)."""


def checked_responses(result, requests):
    """Triton's checks of a plain model's execute return: None (every request
    answers through its sender) or a list with one InferenceResponse or None per
    request. A returned response counts as its sender's one final response."""
    if result is None:
        return [None] * len(requests)
    if not isinstance(result, list):
        raise ReturnError(f"Expected a list in the execute return, found type '{type(result)}'.")
    if len(result) != len(requests):
        raise ReturnError(
            "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
            f"InferenceRequest(s) size is:{len(requests)}, and InferenceResponse(s) size is:{len(result)}\n")
    for r in result:
        if r is not None and not isinstance(r, pb_utils.InferenceResponse):
            raise ReturnError(f"Expected an 'InferenceResponse' object in the execute function return list, found type '{type(r)}'.")
    for req, r in zip(requests, result):
        if r is not None:
            req._sender._count(r, pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    return result


def background_done(future, requests, model_dir):
    """A decoupled async execute finished in the background: an exception is
    logged (as Triton does) and ends each request its model left open, with the error."""
    if future.cancelled() or future.exception() is None:
        return
    text = where(future.exception(), model_dir)
    sys.stderr.write(f"execute failed: {text}\n")
    sys.stderr.flush()
    for req in requests:
        sender = req._sender
        if sender is not None and not sender._closed:
            try:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(text)), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except Exception:
                pass


if __name__ == "__main__":
    main()
