// SharedMemoryManager on real POSIX shm: Triton's register/unregister/status
// semantics, acquire checks (bounds, truncation), deferred unmap, limits.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  liveMappings,
  shmClose,
  shmMap,
  shmOpen,
  shmTruncate,
  shmUnlinkIfExists,
  type ShmFd,
  type ShmMapping,
} from '../../native/index.ts';
import { SharedMemoryManager } from '../../engine/shm/shared-memory-manager.ts';
import { StatusError } from '../../engine/api/status.ts';
import { log } from '../../common/logger.ts';

const PREFIX = `tritonish-test-${process.pid}-mgr-`;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MANAGER_URL = new URL('../../engine/shm/shared-memory-manager.ts', import.meta.url).href;
const INDEX_URL = new URL('../../native/index.ts', import.meta.url).href;
let seq = 0;
const newKey = () => `/${PREFIX}${seq++}`;
const leftovers = () => readdirSync('/dev/shm').filter((n) => n.startsWith(PREFIX));

/** A client's region: the object plus the client's own mapping of it. */
interface ClientRegion {
  key: string;
  fd: ShmFd;
  map: ShmMapping;
}
const clients: ClientRegion[] = [];
function clientRegion(size: number, key = newKey()): ClientRegion {
  const fd = shmOpen(key, { create: true, exclusive: true });
  shmTruncate(fd, size);
  const c = { key, fd, map: shmMap(fd, 0, size) };
  clients.push(c);
  return c;
}

/** The StatusError `fn` throws (fails the test when it throws none). */
function statusOf(fn: () => unknown): StatusError {
  try {
    fn();
  } catch (err) {
    if (err instanceof StatusError) return err;
    throw err;
  }
  throw new Error('expected a StatusError');
}

let mgr: SharedMemoryManager;
let baseline: number;
beforeEach(() => {
  baseline = liveMappings();
  mgr = new SharedMemoryManager();
});
afterEach(() => {
  mgr.close();
  for (const c of clients.splice(0)) {
    c.map.close();
    shmClose(c.fd);
    shmUnlinkIfExists(c.key);
  }
  expect(liveMappings(), 'mappings leaked').toBe(baseline);
  const left = leftovers();
  for (const n of left) shmUnlinkIfExists(`/${n}`);
  expect(left, 'test left objects in /dev/shm').toEqual([]);
  vi.restoreAllMocks();
});

describe('register / status / unregister', () => {
  it('registers a slice of an object, reports it, and reads/writes it in place', () => {
    const c = clientRegion(16384);
    mgr.register('in', c.key, 4096, 8192);
    expect(mgr.status('in')).toEqual([{ name: 'in', key: c.key, offset: 4096, byte_size: 8192 }]);
    expect(mgr.status()).toHaveLength(1);

    c.map.bytes.set([1, 2, 3, 4], 4096 + 100);
    const a = mgr.acquire({ region: 'in', offset: 100, byteSize: 4 }, { tensor: 'INPUT0', kind: 'input' });
    expect([...a.bytes]).toEqual([1, 2, 3, 4]);
    expect(a.key).toBe(c.key);
    expect(a.absoluteOffset).toBe(4196);
    c.map.bytes[4096 + 101] = 42; // written after registration: same pages, no copy
    expect(a.bytes[1]).toBe(42);
    a.bytes[3] = 99; // an output written by the engine lands in the client's region
    expect(c.map.bytes[4096 + 103]).toBe(99);
    a.release();
  });

  it('refuses a duplicate name', () => {
    const c = clientRegion(4096);
    mgr.register('r', c.key, 0, 4096);
    const e = statusOf(() => mgr.register('r', c.key, 0, 1024));
    expect(e.code).toBe('ALREADY_EXISTS');
    expect(e.message).toBe("shared memory region 'r' already in manager");
  });

  it('reports a key naming no object as INVALID_ARG naming the key, errno in the detail', () => {
    const key = newKey();
    const e = statusOf(() => mgr.register('r', key, 0, 16));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe(`Unable to open shared memory region: '${key}'`);
    expect(e.detail).toMatchObject({ errno: 'ENOENT', syscall: 'shm_open' });
    expect(mgr.status()).toEqual([]);
  });

  it('refuses a range beyond the object, and bad keys and numbers, as INVALID_ARG', () => {
    const c = clientRegion(8192);
    const e = statusOf(() => mgr.register('big', c.key, 4096, 4097));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe("failed to register shared memory region 'big': invalid args"); // Triton's words; the sizes go to the log
    expect(statusOf(() => mgr.register('k', '/a/b', 0, 1)).code).toBe('INVALID_ARG');
    expect(statusOf(() => mgr.register('n', c.key, -1, 1)).code).toBe('INVALID_ARG');
    expect(statusOf(() => mgr.register('', c.key, 0, 1)).code).toBe('INVALID_ARG');
    expect(mgr.status()).toEqual([]);
    mgr.register('exact', c.key, 4096, 4096); // the range may end exactly at the object's end
  });

  it('status of an unknown region is NOT_FOUND; unregistering one succeeds', () => {
    const e = statusOf(() => mgr.status('nope'));
    expect(e.code).toBe('NOT_FOUND');
    expect(e.message).toBe("Unable to find system shared memory region: 'nope'");
    expect(() => mgr.unregister('nope')).not.toThrow();
  });

  it("unregister('') removes all and logs who asked", () => {
    const warn = vi.spyOn(log, 'warn').mockImplementation(() => {});
    const c = clientRegion(8192);
    mgr.register('a', c.key, 0, 4096);
    mgr.register('b', c.key, 4096, 4096);
    expect(liveMappings()).toBe(baseline + 3);
    mgr.unregister('', 'grpc client 10.0.0.7');
    expect(mgr.status()).toEqual([]);
    expect(liveMappings()).toBe(baseline + 1); // only the client's own mapping remains
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toContain('grpc client 10.0.0.7');
  });
});

describe('acquire', () => {
  it('checks the region name and the bounds, naming the tensor', () => {
    const c = clientRegion(4096);
    mgr.register('r', c.key, 1024, 1024);
    const missing = statusOf(() => mgr.acquire({ region: 'x', offset: 0, byteSize: 4 }, { tensor: 'IN', kind: 'input' }));
    expect(missing.code).toBe('NOT_FOUND');
    expect(missing.message).toBe("Unable to find shared memory region: 'x' (input 'IN')");
    const oob = statusOf(() => mgr.acquire({ region: 'r', offset: 1000, byteSize: 25 }, { tensor: 'OUT', kind: 'output' }));
    expect(oob.code).toBe('INVALID_ARG');
    expect(oob.message).toBe("Invalid offset + byte size for shared memory region: 'r' (output 'OUT')");
    const past = statusOf(() => mgr.acquire({ region: 'r', offset: 1024, byteSize: 0 }, { tensor: 'OUT', kind: 'output' }));
    expect(past.message).toBe("Invalid offset for shared memory region: 'r' (output 'OUT')");
    const wide = { offset: 8n, byteSize: 2n ** 64n - 1n };
    const over = statusOf(() =>
      mgr.acquire({ region: 'r', offset: 8, byteSize: Number(wide.byteSize), wide }, { tensor: 'OUT', kind: 'output' }),
    );
    expect(over.message).toBe(
      "Integer overflow detected: byte_size (18446744073709551615) + offset (8) exceeds maximum value (18446744073709551615) for region 'r'",
    );
    mgr.acquire({ region: 'r', offset: 1000, byteSize: 24 }, { tensor: 'OUT', kind: 'output' }).release();
  });

  it('rejects bytes a client truncated away with INVALID_ARG before touching them', () => {
    const c = clientRegion(4 * 4096);
    mgr.register('r', c.key, 4096, 3 * 4096);
    shmTruncate(c.fd, 2 * 4096); // the client shrinks its object
    const e = statusOf(() => mgr.acquire({ region: 'r', offset: 4096, byteSize: 16 }, { tensor: 'IN', kind: 'input' }));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toContain('truncated to 8192 bytes');
    expect(e.message).toContain("input 'IN'");
    // bytes still inside the object remain usable
    const ok = mgr.acquire({ region: 'r', offset: 0, byteSize: 4096 }, { tensor: 'IN', kind: 'input' });
    expect(ok.bytes.byteLength).toBe(4096);
    ok.release();
  });

  it('keeps an unregistered region listed and usable until its last user releases, then removes it (Triton)', () => {
    const c = clientRegion(4096);
    mgr.register('r', c.key, 0, 4096);
    c.map.bytes[10] = 5;
    const removed: string[] = [];
    mgr.onRemoved = (key) => removed.push(key);
    const a = mgr.acquire({ region: 'r', offset: 0, byteSize: 64 }, { tensor: 'IN', kind: 'input' });
    mgr.unregister('r');
    expect(mgr.status('r')).toHaveLength(1);
    expect(statusOf(() => mgr.register('r', c.key, 0, 1024)).message).toBe("shared memory region 'r' already in manager");
    const b = mgr.acquire({ region: 'r', offset: 0, byteSize: 64 }, { tensor: 'IN2', kind: 'input' });
    expect(liveMappings()).toBe(baseline + 2);
    a.release();
    a.release(); // idempotent: must not drop b's use
    expect(mgr.status()).toHaveLength(1);
    expect(b.bytes[10]).toBe(5);
    expect(removed).toEqual([]);
    b.release();
    expect(statusOf(() => mgr.status('r')).code).toBe('NOT_FOUND');
    expect(removed).toEqual([c.key]);
    expect(liveMappings()).toBe(baseline + 1);
    expect(b.bytes.byteLength).toBe(0); // the old mapping is gone
    mgr.register('r', c.key, 0, 1024); // the name is free again
  });

  it('close() unmaps registered and draining regions and refuses new ones', () => {
    const c = clientRegion(4096);
    mgr.register('a', c.key, 0, 4096);
    mgr.register('b', c.key, 0, 2048);
    const held = mgr.acquire({ region: 'b', offset: 0, byteSize: 8 }, { tensor: 'T', kind: 'input' });
    mgr.unregister('b');
    mgr.close();
    expect(liveMappings()).toBe(baseline + 1);
    held.release();
    expect(statusOf(() => mgr.register('c', c.key, 0, 1)).code).toBe('UNAVAILABLE');
  });

  it('refuses a region that shrank while mapped, even after the client grew it back', () => {
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `
        const s = await import(${JSON.stringify(INDEX_URL)});
        const { SharedMemoryManager } = await import(${JSON.stringify(MANAGER_URL)});
        const key = '/${PREFIX}child';
        const fd = s.shmOpen(key, { create: true, exclusive: true });
        s.shmTruncate(fd, 4 * 4096);
        const mgr = new SharedMemoryManager();
        mgr.register('r', key, 0, 4 * 4096);
        const a = mgr.acquire({ region: 'r', offset: 3 * 4096, byteSize: 8 }, { tensor: 'IN', kind: 'input' });
        s.shmTruncate(fd, 4096);               // shrunk during a request
        const read = a.bytes[0];               // would be SIGBUS without the guard
        a.release();
        s.shmTruncate(fd, 4 * 4096);           // grown back: fstat alone would pass
        let code, message;
        try { mgr.acquire({ region: 'r', offset: 0, byteSize: 8 }, { tensor: 'IN', kind: 'input' }); }
        catch (e) { code = e.code; message = e.message; }
        mgr.close(); s.shmClose(fd); s.shmUnlink(key);
        console.log(JSON.stringify({ read, code, message }));
      `,
      ],
      { cwd: ROOT, encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    const out = JSON.parse(r.stdout.trim());
    expect(out.read).toBe(0);
    expect(out.code).toBe('INVALID_ARG');
    expect(out.message).toContain("'r'");
    expect(out.message).toContain('shrank');
  });
});

describe('confinement and limits', () => {
  it('accepts only keys under keyPrefix, without opening others', () => {
    const ok = clientRegion(4096, `/${PREFIX}ok-${seq++}`);
    const other = clientRegion(4096);
    const m = new SharedMemoryManager({ keyPrefix: `/${PREFIX}ok-` });
    try {
      m.register('a', ok.key, 0, 4096);
      const e = statusOf(() => m.register('b', other.key, 0, 4096));
      expect(e.code).toBe('INVALID_ARG');
      expect(e.message).toContain(other.key);
      expect(statusOf(() => m.register('c', '/etc-passwd', 0, 1)).code).toBe('INVALID_ARG'); // not INTERNAL: never opened
    } finally {
      m.close();
    }
  });

  it('enforces maxRegions and maxTotalBytes', () => {
    const c = clientRegion(16384);
    const m = new SharedMemoryManager({ maxRegions: 2, maxTotalBytes: 8192 });
    try {
      const tooBig = statusOf(() => m.register('huge', c.key, 0, 8193));
      expect(tooBig.code).toBe('INVALID_ARG');
      expect(tooBig.message).toContain('8192');
      m.register('a', c.key, 0, 5000);
      const full = statusOf(() => m.register('b', c.key, 0, 5000));
      expect(full.code).toBe('UNAVAILABLE');
      expect(full.message).toContain("'b'");
      m.register('b', c.key, 0, 3192);
      const count = statusOf(() => m.register('c', c.key, 0, 1));
      expect(count.code).toBe('UNAVAILABLE');
      expect(count.message).toContain('2 regions');
      m.unregister('a');
      m.register('c', c.key, 0, 5000);
      expect(m.status().map((s) => s.name)).toEqual(['b', 'c']);
    } finally {
      m.close();
    }
  });
});
