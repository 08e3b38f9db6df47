# Tensor bytes for the stub (stub.py): reads what the engine sent (inline
# base64, its input arena, a client's region mapped copy-on-write, or a
# one-frame object) into numpy arrays the model owns, and writes outputs
# inline or into one new shm object per frame, which the engine unlinks.
import base64
import mmap
import os
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

INLINE_MAX = 1024
ALIGN = 64

# Fixed-width datatypes -> numpy (pb_utils keeps the one table; BYTES is decoded apart).
NP_OF = {k: v for k, v in pb_utils._NAME_TO_NP.items() if k != "BYTES"}


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
            raw = bytearray(memoryview(mm)[off:off + size]) if mm else bytearray()  # one copy, not two
            return decode(raw, dt, shape)
        mm = self.arena(w["key"], off + size)
        return decode(bytearray(memoryview(mm)[off:off + size]), dt, shape)  # one copy, not two


def decode(raw, dt, shape):
    if dt == "BYTES":
        return pb_utils.deserialize_bytes_tensor(raw).reshape(shape)
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
            mm[off:off + n] = data  # any buffer: no temporary copy
            out.append({"name": name, "datatype": dt, "shape": shape, "key": key, "offset": off, "size": n})
            off += (n + ALIGN - 1) // ALIGN * ALIGN
        if mm is not None:
            mm.close()
        return out
