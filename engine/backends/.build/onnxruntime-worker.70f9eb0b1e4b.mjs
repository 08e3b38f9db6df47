var __defProp = Object.defineProperty;
var __getOwnPropNames = Object.getOwnPropertyNames;
var __esm = (fn, res, err) => function __init() {
  if (err) throw err[0];
  try {
    return fn && (res = (0, fn[__getOwnPropNames(fn)[0]])(fn = 0)), res;
  } catch (e) {
    throw err = [e], e;
  }
};
var __export = (target, all) => {
  for (var name in all)
    __defProp(target, name, { get: all[name], enumerable: true });
};

// native/index.ts
var native_exports = {};
__export(native_exports, {
  ShmSysError: () => ShmSysError,
  checkSize: () => checkSize,
  isValidShmKey: () => isValidShmKey,
  liveMappings: () => liveMappings,
  pageSize: () => pageSize,
  shmClose: () => shmClose,
  shmMap: () => shmMap,
  shmOpen: () => shmOpen,
  shmSize: () => shmSize,
  shmTruncate: () => shmTruncate,
  shmUnlink: () => shmUnlink,
  shmUnlinkIfExists: () => shmUnlinkIfExists
});
import { createRequire } from "node:module";
import { getSystemErrorMap, getSystemErrorName } from "node:util";
function loadAddon() {
  const require2 = createRequire("file:///work/main/native/index.ts");
  try {
    return require2("./build/Release/shm.node");
  } catch (err) {
    throw new Error(
      `native shm addon not built (native/build/Release/shm.node): run \`npm install\` or \`npx node-gyp rebuild --directory=native\` (${err.message})`
    );
  }
}
function isValidShmKey(key) {
  return typeof key === "string" && KEY_RE.test(key) && !key.includes("..") && !/^\/\.+$/.test(key);
}
function liveMappings() {
  return addon.liveMappings();
}
function shmOpen(key, opts = {}) {
  checkKey(key, "shm_open");
  const mode = opts.mode ?? 384;
  if (!Number.isInteger(mode) || mode < 0 || mode > 4095) throw new RangeError(`invalid mode ${mode}`);
  let flags = 0;
  if (opts.create || opts.exclusive) flags |= addon.flags.create;
  if (opts.exclusive) flags |= addon.flags.exclusive;
  if (opts.readOnly) flags |= addon.flags.readOnly;
  return sys(() => addon.open(key, flags, mode), key);
}
function shmTruncate(fd, size) {
  checkFd(fd);
  checkCount(size, "size");
  sys(() => addon.ftruncate(fd, size));
}
function shmSize(fd) {
  checkFd(fd);
  return sys(() => addon.fstatSize(fd));
}
function checkSize(fd, needEnd) {
  const size = shmSize(fd);
  return { ok: size >= needEnd, size };
}
function shmMap(fd, offset, length, opts = {}) {
  checkFd(fd);
  checkCount(offset, "offset");
  checkCount(length, "length");
  if (length === 0) return new Mapping(null, new Uint8Array(0));
  const delta = offset % pageSize;
  const buffer = sys(() => addon.mmap(fd, offset - delta, length + delta, !opts.readOnly));
  return new Mapping(buffer, new Uint8Array(buffer, delta, length));
}
function shmClose(fd) {
  checkFd(fd);
  sys(() => addon.close(fd));
}
function shmUnlink(key) {
  checkKey(key, "shm_unlink");
  sys(() => addon.unlink(key), key);
}
function shmUnlinkIfExists(key) {
  try {
    shmUnlink(key);
    return true;
  } catch (err) {
    if (err instanceof ShmSysError && err.errno === "ENOENT") return false;
    throw err;
  }
}
function sys(call, key) {
  try {
    return call();
  } catch (err) {
    const raw = err;
    if (typeof raw.errno !== "number" || typeof raw.syscall !== "string") throw err;
    const name = safeErrName(raw.errno);
    const text = getSystemErrorMap().get(-raw.errno)?.[1] ?? `errno ${raw.errno}`;
    const where = key !== void 0 ? ` '${key}'` : "";
    throw new ShmSysError(name, raw.syscall, `${raw.syscall}${where}: ${text} (${name})`, key);
  }
}
function safeErrName(errno) {
  try {
    return getSystemErrorName(-errno);
  } catch {
    return `E${errno}`;
  }
}
function checkKey(key, syscall) {
  if (!isValidShmKey(key)) {
    throw new ShmSysError(
      "EINVAL",
      syscall,
      `invalid shared memory key '${String(key)}': expected '/' followed by 1-250 of [A-Za-z0-9._-]`,
      String(key)
    );
  }
}
function checkFd(fd) {
  if (!Number.isInteger(fd) || fd < 0 || fd > 2147483647) throw new RangeError(`invalid file descriptor ${fd}`);
}
function checkCount(n, what) {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${what} must be a non-negative integer, got ${n}`);
}
var addon, ShmSysError, KEY_RE, pageSize, Mapping;
var init_native = __esm({
  "native/index.ts"() {
    "use strict";
    addon = loadAddon();
    ShmSysError = class extends Error {
      /** errno name, e.g. 'ENOENT'. */
      errno;
      syscall;
      key;
      constructor(errno, syscall, message, key) {
        super(message);
        this.name = "ShmSysError";
        this.errno = errno;
        this.syscall = syscall;
        if (key !== void 0) this.key = key;
      }
    };
    KEY_RE = /^\/[A-Za-z0-9._-]{1,250}$/;
    pageSize = addon.pageSize;
    Mapping = class {
      constructor(buffer, bytes) {
        this.bytes = bytes;
        this.#buffer = buffer;
      }
      bytes;
      #buffer;
      #faultedAtClose = false;
      get closed() {
        return this.#buffer === null;
      }
      get faulted() {
        return this.#buffer ? addon.mappingFaulted(this.#buffer) : this.#faultedAtClose;
      }
      close() {
        const buffer = this.#buffer;
        if (!buffer) return;
        this.#faultedAtClose = addon.mappingFaulted(buffer);
        this.#buffer = null;
        sys(() => addon.munmap(buffer));
      }
    };
  }
});

// engine/backends/onnxruntime-worker.ts
import { parentPort, workerData } from "node:worker_threads";
import * as ort from "onnxruntime-node";

// protocol/tensor-codec.ts
var DATATYPE_SIZES = {
  BOOL: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  UINT64: 8,
  INT8: 1,
  INT16: 2,
  INT32: 4,
  INT64: 8,
  FP16: 2,
  BF16: 2,
  FP32: 4,
  FP64: 8,
  BYTES: 0
};
var DATATYPES = Object.keys(DATATYPE_SIZES);
function typedView(dt, bytes) {
  const size = DATATYPE_SIZES[dt] || 1;
  const src = bytes.byteOffset % size === 0 ? bytes : new Uint8Array(bytes);
  const { buffer, byteOffset } = src;
  const n = src.byteLength / size;
  switch (dt) {
    case "BOOL":
    case "UINT8":
    case "BYTES":
      return src;
    case "INT8":
      return new Int8Array(buffer, byteOffset, n);
    case "UINT16":
    case "FP16":
    case "BF16":
      return new Uint16Array(buffer, byteOffset, n);
    case "INT16":
      return new Int16Array(buffer, byteOffset, n);
    case "UINT32":
      return new Uint32Array(buffer, byteOffset, n);
    case "INT32":
      return new Int32Array(buffer, byteOffset, n);
    case "UINT64":
      return new BigUint64Array(buffer, byteOffset, n);
    case "INT64":
      return new BigInt64Array(buffer, byteOffset, n);
    case "FP32":
      return new Float32Array(buffer, byteOffset, n);
    case "FP64":
      return new Float64Array(buffer, byteOffset, n);
  }
}
function serializeBytes(items) {
  const enc = new TextEncoder();
  const parts = items.map((x) => typeof x === "string" ? enc.encode(x) : x);
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.byteLength, 0));
  const dv = new DataView(out.buffer);
  let o = 0;
  for (const p of parts) {
    dv.setUint32(o, p.byteLength, true);
    out.set(p, o + 4);
    o += 4 + p.byteLength;
  }
  return out;
}
function deserializeBytes(buf, tensorName = "tensor") {
  const out = [];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = 0;
  while (o < buf.byteLength) {
    if (o + 4 > buf.byteLength) throw new Error(`unexpected end of BYTES data for '${tensorName}'`);
    const len = dv.getUint32(o, true);
    if (o + 4 + len > buf.byteLength) throw new Error(`BYTES element length ${len} overruns the data of '${tensorName}'`);
    out.push(buf.subarray(o + 4, o + 4 + len));
    o += 4 + len;
  }
  return out;
}
var INT_RANGE = {
  INT8: [-(2 ** 7), 2 ** 7],
  INT16: [-(2 ** 15), 2 ** 15],
  INT32: [-(2 ** 31), 2 ** 31],
  INT64: [-(2 ** 63), 2 ** 63],
  UINT8: [0, 2 ** 8],
  UINT16: [0, 2 ** 16],
  UINT32: [0, 2 ** 32],
  UINT64: [0, 2 ** 64]
};

// engine/backends/ort-types.ts
var TO_ORT = {
  BOOL: "bool",
  UINT8: "uint8",
  UINT16: "uint16",
  UINT32: "uint32",
  UINT64: "uint64",
  INT8: "int8",
  INT16: "int16",
  INT32: "int32",
  INT64: "int64",
  FP16: "float16",
  FP32: "float32",
  FP64: "float64",
  BYTES: "string"
};
var FROM_ORT = Object.fromEntries(
  Object.entries(TO_ORT).map(([dt, o]) => [o, dt])
);
function datatypeOfOrt(t) {
  return FROM_ORT[t];
}

// engine/backends/onnxruntime-worker.ts
var init = workerData;
var port = parentPort;
var session;
var mappings = /* @__PURE__ */ new Map();
var native;
var inUse = [];
var running = false;
var forgetAfterRun = /* @__PURE__ */ new Set();
async function mapShm(s) {
  native ??= await Promise.resolve().then(() => (init_native(), native_exports));
  const id = `${s.key}:${s.fd}:${s.regionOffset}:${s.regionSize}`;
  let m = mappings.get(id);
  if (m?.mapping.faulted) {
    dropMapping(id, m);
    m = void 0;
  }
  const fd = s.fd;
  if (!m) {
    m = { mapping: native.shmMap(fd, s.regionOffset, s.regionSize), key: s.key };
    mappings.set(id, m);
  }
  if (s.offset + s.byteSize > m.mapping.bytes.byteLength) throw new Error(`shm slice out of bounds in ${s.key}`);
  const needEnd = s.regionOffset + s.offset + s.byteSize;
  const { ok, size } = native.checkSize(fd, needEnd);
  if (!ok) throw new Error(`shared memory object '${s.key}' was truncated to ${size} bytes; the tensor needs bytes up to ${needEnd}`);
  inUse.push(m);
  return m.mapping.bytes.subarray(s.offset, s.offset + s.byteSize);
}
function dropMapping(id, m) {
  mappings.delete(id);
  m.mapping.close();
}
function forgetKey(key) {
  for (const [id, m] of mappings) if (m.key === key) dropMapping(id, m);
}
function view(type, bytes) {
  const dt = datatypeOfOrt(type);
  if (!dt || dt === "BYTES") throw new Error(`unsupported tensor type ${type}`);
  return typedView(dt, bytes);
}
var utf8 = new TextDecoder();
var decodeStrings = (bytes) => deserializeBytes(bytes).map((b) => utf8.decode(b));
var encodeStrings = (items) => serializeBytes(items);
async function feedOf(t) {
  const bytes = t.shm ? await mapShm(t.shm) : new Uint8Array(t.buffer, t.byteOffset ?? 0, t.byteLength ?? t.buffer.byteLength);
  if (t.type === "string") return new ort.Tensor("string", decodeStrings(bytes), t.dims);
  return new ort.Tensor(t.type, view(t.type, bytes), t.dims);
}
function meta(m) {
  return m.map(
    (x) => x.isTensor ? { name: x.name, type: x.type, shape: x.shape.map((d) => typeof d === "number" ? d : String(d)) } : { name: x.name, type: "unknown", shape: [] }
  );
}
async function run(msg) {
  const returned = [...new Set(msg.inputs.flatMap((t) => t.buffer ? [t.buffer] : []))];
  running = true;
  inUse = [];
  try {
    const feeds = {};
    for (const t of msg.inputs) feeds[t.name] = await feedOf(t);
    const fetches = {};
    for (const o of msg.outputs) {
      if (o.shm && o.shm.type !== "string") {
        const bytes = await mapShm(o.shm);
        fetches[o.name] = new ort.Tensor(o.shm.type, view(o.shm.type, bytes), o.shm.dims);
      } else fetches[o.name] = null;
    }
    const t0 = process.hrtime.bigint();
    const res = await session.run(feeds, msg.outputs.length ? fetches : void 0);
    const inferNs = Number(process.hrtime.bigint() - t0);
    const faulted = inUse.find((m) => m.mapping.faulted);
    if (faulted) throw new Error(`shared memory object '${faulted.key}' shrank while the model read it (its pages read as zeros); results discarded`);
    const outputs = [];
    const transfer = [...returned];
    for (const [name, tensor] of Object.entries(res)) {
      const dims = [...tensor.dims];
      const req = msg.outputs.find((o) => o.name === name);
      if (req?.shm && req.shm.type !== "string") {
        outputs.push({ name, type: tensor.type, dims, inShm: true });
        continue;
      }
      let bytes;
      if (tensor.type === "string") bytes = encodeStrings(tensor.data);
      else {
        const d = tensor.data;
        bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
      }
      if (!transfer.includes(bytes.buffer)) transfer.push(bytes.buffer);
      outputs.push({ name, type: tensor.type, dims, buffer: bytes.buffer, byteOffset: bytes.byteOffset, byteLength: bytes.byteLength });
    }
    post({ kind: "result", seq: msg.seq, outputs, returned, inferNs }, transfer);
  } catch (err) {
    post({ kind: "run-error", seq: msg.seq, message: err.message, returned }, returned);
  } finally {
    running = false;
    inUse = [];
    for (const key of forgetAfterRun) forgetKey(key);
    forgetAfterRun.clear();
  }
}
function post(m, transfer = []) {
  port.postMessage(m, transfer);
}
port.on("message", (m) => {
  if (m.kind === "run") void run(m);
  else if (m.kind === "forget-shm") {
    if (running) forgetAfterRun.add(m.key);
    else forgetKey(m.key);
  } else if (m.kind === "close") {
    for (const [id, mp] of mappings) dropMapping(id, mp);
    void session?.release().finally(() => post({ kind: "closed" }));
  }
});
try {
  session = await ort.InferenceSession.create(init.modelPath, init.sessionOptions);
  post({ kind: "ready", inputs: meta(session.inputMetadata), outputs: meta(session.outputMetadata) });
} catch (err) {
  post({ kind: "load-error", message: err.message });
}
