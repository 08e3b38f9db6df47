// Tensor bytes between the engine and a stub: small tensors inline (base64 in
// the frame), the rest in POSIX shm. Engine to stub: an input arena per
// instance (created and grown here, read by the stub), or the client's own
// registered region mapped copy-on-write by the stub (no copy). Stub to
// engine: one shm object per frame, created by the stub, copied out and
// unlinked here. Every object name starts with the instance's prefix, so a
// sweep removes whatever a killed stub left.
import fs from 'node:fs';
import type { Tensor } from '../../api/infer-request.ts';
import type { InferInput } from '../../api/infer-request.ts';
import { isDatatype } from '../../api/datatypes.ts';
import { internal } from '../../api/status.ts';
import { shmClose, shmMap, shmOpen, shmSize, shmTruncate, shmUnlinkIfExists, type ShmFd, type ShmMapping } from '../../../native/index.ts';

/** Tensors up to this many bytes travel inline in the frame. */
export const INLINE_MAX = 1024;
const ALIGN = 64;

/** A tensor as a frame carries it. */
export interface WireTensor {
  name: string;
  datatype: string;
  shape: number[];
  b64?: string;
  key?: string;
  offset?: number;
  size?: number;
  /** A client's region: map copy-on-write, leave the object alone. */
  cow?: boolean;
  /** An object made for this one frame: the reader unlinks it. */
  own?: boolean;
}

const align = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

/** The engine-owned input arena of one instance; used by one execute at a time. */
export class InputArena {
  private fd: ShmFd | undefined;
  private map: ShmMapping | undefined;
  private size = 0;

  /** `initialBytes`: the size made at reserve() and the least it grows to (shm-default-byte-size). */
  constructor(
    readonly key: string,
    private readonly initialBytes = 1 << 20,
  ) {}

  /** Make the arena at its initial size now (at stub start, as Triton sizes its shm pool), if not made yet. */
  reserve(): void {
    if (this.size < this.initialBytes) this.grow(this.initialBytes);
  }

  /** Wire form of each request's inputs; large bytes are copied into the arena (grown as needed). */
  encode(requests: InferInput[][]): WireTensor[][] {
    let need = 0;
    // Every input the loop below copies into the arena counts: inline-sent ones and BYTES from a client's region.
    for (const inputs of requests) {
      for (const t of inputs)
        if ((!t.shmLocation || t.datatype === 'BYTES') && t.data.byteLength > INLINE_MAX) need += align(t.data.byteLength);
    }
    if (need > this.size) this.grow(need);
    let off = 0;
    return requests.map((inputs) =>
      inputs.map((t) => {
        const base = { name: t.name, datatype: t.datatype, shape: t.shape };
        const loc = t.shmLocation;
        if (loc && t.datatype !== 'BYTES') return { ...base, key: loc.key, offset: loc.offset, size: loc.byteSize, cow: true };
        if (t.data.byteLength <= INLINE_MAX)
          return { ...base, b64: Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString('base64') };
        this.map!.bytes.set(t.data, off);
        const w = { ...base, key: this.key, offset: off, size: t.data.byteLength };
        off += align(t.data.byteLength);
        return w;
      }),
    );
  }

  private grow(need: number): void {
    const size = Math.max(need, this.size * 2, this.initialBytes);
    if (this.fd === undefined) this.fd = shmOpen(this.key, { create: true });
    shmTruncate(this.fd, size);
    this.map?.close();
    this.map = shmMap(this.fd, 0, size);
    this.size = size;
  }

  close(): void {
    this.map?.close();
    this.map = undefined;
    if (this.fd !== undefined) shmClose(this.fd);
    this.fd = undefined;
    shmUnlinkIfExists(this.key);
  }
}

/** Engine tensors -> wire, large ones in one new object `key` the stub unlinks after reading (BLS replies). */
export function encodeOwned(tensors: Tensor[], key: string): WireTensor[] {
  const total = tensors.reduce((n, t) => n + (t.data.byteLength > INLINE_MAX ? align(t.data.byteLength) : 0), 0);
  let map: ShmMapping | undefined;
  if (total) {
    const fd = shmOpen(key, { exclusive: true });
    try {
      shmTruncate(fd, total);
      map = shmMap(fd, 0, total);
    } finally {
      shmClose(fd);
    }
  }
  let off = 0;
  const out = tensors.map((t): WireTensor => {
    const base = { name: t.name, datatype: t.datatype, shape: t.shape };
    if (t.data.byteLength <= INLINE_MAX)
      return { ...base, b64: Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString('base64') };
    map!.bytes.set(t.data, off);
    const w = { ...base, key, offset: off, size: t.data.byteLength, own: true };
    off += align(t.data.byteLength);
    return w;
  });
  map?.close();
  return out;
}

/** Wire tensors from the stub -> engine tensors with their own bytes; unlinks the stub's objects. */
export function decodeFromStub(wire: WireTensor[], prefix: string): Tensor[] {
  const maps = new Map<string, ShmMapping>();
  try {
    return wire.map((w) => {
      if (!isDatatype(w.datatype)) throw internal(`python stub sent output '${w.name}' with unknown datatype ${w.datatype}`);
      const base = { name: w.name, datatype: w.datatype, shape: w.shape };
      if (w.b64 !== undefined) return { ...base, data: new Uint8Array(Buffer.from(w.b64, 'base64')) };
      if (!w.key?.startsWith(`${prefix}.`)) throw internal(`python stub named shm object '${w.key}' outside its prefix`);
      let m = maps.get(w.key);
      if (!m) {
        const fd = shmOpen(w.key, { readOnly: true });
        try {
          m = shmMap(fd, 0, shmSize(fd), { readOnly: true });
        } finally {
          shmClose(fd);
        }
        maps.set(w.key, m);
      }
      const data = new Uint8Array(w.size!);
      data.set(m.bytes.subarray(w.offset!, w.offset! + w.size!));
      return { ...base, data };
    });
  } finally {
    for (const [key, m] of maps) {
      m.close();
      shmUnlinkIfExists(key);
    }
  }
}

/** Unlink every object whose name starts with `prefix` (what a killed stub or a lost reply left). */
export function sweepShm(prefix: string): number {
  const stem = `${prefix.slice(1)}.`;
  let n = 0;
  let names: string[] = [];
  try {
    names = fs.readdirSync('/dev/shm');
  } catch {
    // No /dev/shm to read: no stub segments can be left there to remove.
    return 0;
  }
  for (const name of names) if (name.startsWith(stem) && shmUnlinkIfExists(`/${name}`)) n++;
  return n;
}

/** Unlink /dev/shm/tpy.<pid>.* objects of engine processes that no longer exist (an engine killed with SIGKILL). */
export function sweepStaleShm(): number {
  let names: string[] = [];
  try {
    names = fs.readdirSync('/dev/shm');
  } catch {
    // No /dev/shm to read: no stub segments can be left there to remove.
    return 0;
  }
  let n = 0;
  for (const name of names) {
    const m = /^tpy\.(\d+)\./.exec(name);
    if (!m || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) continue;
    if (shmUnlinkIfExists(`/${name}`)) n++;
  }
  return n;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
