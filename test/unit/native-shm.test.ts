// The shm addon and its TS API on real POSIX shared memory: zero-copy
// mappings, close/finalizer, errno errors, key checks, the SIGBUS guard
// (in child processes, so a failure cannot take vitest down) and worker threads.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ShmSysError,
  checkSize,
  isValidShmKey,
  liveMappings,
  pageSize,
  shmClose,
  shmMap,
  shmOpen,
  shmSize,
  shmTruncate,
  shmUnlink,
  shmUnlinkIfExists,
  type ShmFd,
} from '../../native/index.ts';

const PREFIX = `tritonish-test-${process.pid}-native-`;
const INDEX_URL = new URL('../../native/index.ts', import.meta.url).href;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let seq = 0;
const newKey = () => `/${PREFIX}${seq++}`;
const leftovers = () => readdirSync('/dev/shm').filter((n) => n.startsWith(PREFIX));
const fds: ShmFd[] = [];

function create(key: string, size: number): ShmFd {
  const fd = shmOpen(key, { create: true, exclusive: true });
  fds.push(fd);
  shmTruncate(fd, size);
  return fd;
}

/** Run ESM code in a fresh node (tsx loaded, gc exposed); the code may print one JSON line. */
function runChild(code: string) {
  const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', code], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 30_000,
  });
  const last = r.stdout.trim().split('\n').pop() ?? '';
  return { status: r.status, signal: r.signal, stderr: r.stderr, out: last.startsWith('{') ? JSON.parse(last) : undefined };
}

afterEach(() => {
  for (const fd of fds.splice(0)) shmClose(fd);
  const left = leftovers();
  for (const n of left) shmUnlinkIfExists(`/${n}`);
  expect(left, 'test left objects in /dev/shm').toEqual([]);
});

describe('mapping', () => {
  it('is zero-copy across mappings, fds and the /dev/shm file', () => {
    const key = newKey();
    const fd = create(key, 3 * pageSize);
    const whole = shmMap(fd, 0, 3 * pageSize);
    const fd2 = shmOpen(key, { readOnly: true });
    fds.push(fd2);
    const part = shmMap(fd2, pageSize + 10, 100, { readOnly: true });
    expect(part.bytes.byteLength).toBe(100);
    expect(part.bytes.byteOffset).toBe(10); // mapped from the page below, viewed at the offset

    whole.bytes.set([7, 8, 9], pageSize + 10);
    expect([...part.bytes.subarray(0, 3)]).toEqual([7, 8, 9]);
    whole.bytes[pageSize + 109] = 200; // after both mappings exist: no copy anywhere
    expect(part.bytes[99]).toBe(200);
    expect(readFileSync(`/dev/shm${key}`)[pageSize + 11]).toBe(8);

    expect(shmSize(fd2)).toBe(3 * pageSize);
    expect(checkSize(fd2, 3 * pageSize)).toEqual({ ok: true, size: 3 * pageSize });
    expect(checkSize(fd2, 3 * pageSize + 1).ok).toBe(false);
    whole.close();
    part.close();
    shmUnlink(key);
  });

  it('close() unmaps once, detaches the view, and the count of live mappings follows', () => {
    const key = newKey();
    const fd = create(key, pageSize);
    const before = liveMappings();
    const m = shmMap(fd, 0, pageSize);
    expect(liveMappings()).toBe(before + 1);
    expect(m.closed).toBe(false);
    m.close();
    expect(m.closed).toBe(true);
    expect(m.bytes.byteLength).toBe(0);
    expect(liveMappings()).toBe(before);
    m.close(); // idempotent
    expect(liveMappings()).toBe(before);
    expect(shmMap(fd, 0, 0).bytes.byteLength).toBe(0); // empty mapping needs no syscall
    shmUnlink(key);
  });

  it('unmaps dropped mappings in the finalizer', () => {
    const r = runChild(`
      const s = await import(${JSON.stringify(INDEX_URL)});
      const key = '/${PREFIX}fin';
      const fd = s.shmOpen(key, { create: true, exclusive: true });
      s.shmTruncate(fd, 4096);
      const base = s.liveMappings();
      (() => { for (let i = 0; i < 50; i++) s.shmMap(fd, 0, 4096).bytes[0] = i; })();
      const mapped = s.liveMappings() - base;
      for (let i = 0; i < 20 && s.liveMappings() > base; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 10)); }
      s.shmClose(fd); s.shmUnlink(key);
      console.log(JSON.stringify({ mapped, left: s.liveMappings() - base }));
    `);
    expect(r.stderr).toBe('');
    expect(r.out).toEqual({ mapped: 50, left: 0 });
  });
});

describe('errors', () => {
  it('names the key and errno of a failed shm_open', () => {
    const key = newKey();
    let err: unknown;
    try {
      shmOpen(key);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ShmSysError);
    expect(err).toMatchObject({ errno: 'ENOENT', syscall: 'shm_open', key });
    expect((err as Error).message).toContain(`'${key}'`);
    expect((err as Error).message).toContain('ENOENT');
  });

  it('reports EEXIST, EACCES and ENOENT from the syscalls', () => {
    const key = newKey();
    const fd = create(key, pageSize);
    expect(() => shmOpen(key, { create: true, exclusive: true })).toThrow(expect.objectContaining({ errno: 'EEXIST' }));
    const ro = shmOpen(key, { readOnly: true });
    fds.push(ro);
    expect(() => shmMap(ro, 0, pageSize)).toThrow(expect.objectContaining({ errno: 'EACCES', syscall: 'mmap' }));
    expect(() => shmTruncate(ro, 1)).toThrow(expect.objectContaining({ syscall: 'ftruncate' }));
    expect(shmSize(fd)).toBe(pageSize);
    shmUnlink(key);
    expect(() => shmUnlink(key)).toThrow(expect.objectContaining({ errno: 'ENOENT', syscall: 'shm_unlink' }));
    expect(shmUnlinkIfExists(key)).toBe(false);
  });

  it('rejects bad keys before any syscall, and bad numbers', () => {
    for (const bad of ['noslash', '/a/b', '/', '/..', '/.', '/a..b', '/a b', `/${'x'.repeat(251)}`, '//x']) {
      expect(isValidShmKey(bad), bad).toBe(false);
      expect(() => shmOpen(bad, { create: true }), bad).toThrow(
        expect.objectContaining({ errno: 'EINVAL', syscall: 'shm_open', key: bad }),
      );
    }
    expect(isValidShmKey(`/${'x'.repeat(250)}`)).toBe(true);
    expect(isValidShmKey('/a.b-c_D9')).toBe(true);
    expect(() => shmUnlink('/a/b')).toThrow(ShmSysError);
    expect(leftovers()).toEqual([]);
    const key = newKey();
    const fd = create(key, pageSize);
    expect(() => shmTruncate(fd, -1)).toThrow(RangeError);
    expect(() => shmMap(fd, 0.5, 10)).toThrow(RangeError);
    expect(() => shmMap(-1 as ShmFd, 0, 10)).toThrow(RangeError);
    shmUnlink(key);
  });
});

describe('SIGBUS guard', () => {
  it('survives reading and writing past the end of a region truncated under its mapping', () => {
    const r = runChild(`
      const s = await import(${JSON.stringify(INDEX_URL)});
      const key = '/${PREFIX}bus';
      const fd = s.shmOpen(key, { create: true, exclusive: true });
      s.shmTruncate(fd, 4 * s.pageSize);
      const m = s.shmMap(fd, 0, 4 * s.pageSize);
      m.bytes.fill(9);
      s.shmTruncate(fd, s.pageSize);               // the "client" shrinks its region
      const before = m.faulted;
      const past = m.bytes[3 * s.pageSize + 5];     // SIGBUS without the guard
      m.bytes[2 * s.pageSize] = 1;                  // a write lands in a zero page
      const kept = m.bytes[10];                     // the page still backed keeps its data
      const out = { before, past, kept, faulted: m.faulted, size: s.shmSize(fd) };
      m.close();
      out.faultedAfterClose = m.faulted;
      s.shmClose(fd); s.shmUnlink(key);
      console.log(JSON.stringify(out));
    `);
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.out).toEqual({ before: false, past: 0, kept: 9, faulted: true, size: pageSize, faultedAfterClose: true });
  });

  it('leaves SIGBUS it does not own to the default action', () => {
    const r = runChild(`
      const s = await import(${JSON.stringify(INDEX_URL)});
      const key = '/${PREFIX}foreign';
      const fd = s.shmOpen(key, { create: true, exclusive: true });
      s.shmTruncate(fd, 4096);
      const m = s.shmMap(fd, 0, 4096); // installs the guard
      s.shmClose(fd); s.shmUnlink(key);
      process.kill(process.pid, 'SIGBUS');
      await new Promise((r) => setTimeout(r, 1000));
      console.log(JSON.stringify({ survived: true, m: m.closed }));
    `);
    expect(r.signal).toBe('SIGBUS');
    expect(r.out).toBeUndefined();
  });
});

describe('worker threads', () => {
  it('loads in a worker, which maps the same bytes by key and offset', () => {
    const r = runChild(`
      const s = await import(${JSON.stringify(INDEX_URL)});
      const { Worker } = await import('node:worker_threads');
      const key = '/${PREFIX}worker';
      const fd = s.shmOpen(key, { create: true, exclusive: true });
      s.shmTruncate(fd, 3 * s.pageSize);
      const m = s.shmMap(fd, 0, 3 * s.pageSize);
      m.bytes[5000] = 17;
      const code = \`
        import { workerData, parentPort } from 'node:worker_threads';
        import { tsImport } from 'tsx/esm/api';
        const s = await tsImport(workerData.url, import.meta.url);
        const fd = s.shmOpen(workerData.key);
        const m = s.shmMap(fd, 5000, 10);
        m.bytes[1] = m.bytes[0] + 1;
        parentPort.postMessage(m.bytes[0]);
        m.close(); s.shmClose(fd);\`;
      const w = new Worker(code, { eval: true, workerData: { key, url: ${JSON.stringify(INDEX_URL)} } });
      const seen = await new Promise((res, rej) => { w.on('message', res); w.on('error', rej); });
      await new Promise((res) => w.on('exit', res));
      const out = { seen, wrote: m.bytes[5001] };
      m.close(); s.shmClose(fd); s.shmUnlink(key);
      console.log(JSON.stringify(out));
    `);
    expect(r.stderr).toBe('');
    expect(r.out).toEqual({ seen: 17, wrote: 18 });
  });
});
