// Scale-out on real separate hosts made from Linux namespaces on one machine
// (see L0_multi_host-support.ts): three hosts, each with its own network
// namespace, its own tmpfs /dev/shm and hostname, running an engine and a
// gateway as a pod would; one Redis in the root namespace on the bridge,
// shared by all. Shows: a deploy through one gateway reaches every gateway;
// shm staging works per host and no host sees another's regions; a host
// SIGKILLed while holding async jobs loses none of them (a survivor claims
// and finishes them, callbacks at least once, deduplicated on X-Job-Id by
// the receiver); the dead host's leases, consumer and presence are reaped
// from Redis; a client spreading load over the hosts loses no accepted
// request across the kill.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBody, signatureMatches } from '../../gateway/webhooks/signature.ts';
import { freePort, waitFor } from './L0_gateway-support.ts';
import { ROOT, removeDir, tempRepo } from './helpers.ts';
import { Lab, namespacesUnavailable, type Host } from './L0_multi_host-support.ts';

type Json = Record<string, any>;
const SECRET = `whsec-${process.pid}`;
const TOKEN = `admin-${process.pid}`;
// Lease and job-claim periods: short enough that reaping and reclaiming show within the test, long enough
// that a live gateway's renewals and heartbeats (every third of a period) keep up on a heavily loaded host.
// (At 1.5 s a stalled event loop let a live host's jobs be reclaimed before the kill.) Every wait below is
// on a condition, with a ceiling far above the time it takes on a quiet host.
const LEASE_TTL_MS = 4000;
const CLAIM_IDLE_MS = 4000;
/**
 * A gateway silent this long is dead and reaped (--presence-ttl-ms; heartbeats every third of it): the lease
 * period, whose renewals keep up at the same pace (the default, three lease periods, only makes the reaping
 * after the kill wait 8 s longer).
 */
const PRESENCE_TTL_MS = LEASE_TTL_MS;
/** Deploy notices reach replicas over Redis pub/sub; without one, a replica's fallback poll (every 5 s) would. */
const DEPLOY_POLL_MS = 5000;
const INPUTS = { inputs: { INPUT0: Array.from({ length: 16 }, (_, i) => i), INPUT1: Array.from({ length: 16 }, () => 3) } };
const SUM = INPUTS.inputs.INPUT0.map((v) => v + 3);

const skipReason = namespacesUnavailable();
if (skipReason) console.log(`L0_multi_host skipped: ${skipReason}`);

let lab: Lab;
let redis: Redis;
let redisUrl: string;
let repo: string;
let work: string;
let receiver: http.Server;
let callbackUrl: string;
/** Callbacks received: job id -> deliveries (a job may arrive more than once). */
const deliveries = new Map<string, { at: number; signed: boolean; sum: number[] }[]>();
const gw = (h: Host) => `http://${h.ip}:8080`;

const post = (h: Host, fn: string, headers: Record<string, string> = {}) =>
  fetch(`${gw(h)}/fn/${fn}`, { method: 'POST', body: JSON.stringify(INPUTS), headers: { 'Content-Type': 'application/json', ...headers } });
const postAsync = (h: Host) => post(h, 'adder', { 'X-Callback-Url': callbackUrl });
const admin = (h: Host, method: string, body?: unknown) =>
  fetch(`${gw(h)}/admin/functions`, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
  });

/** Gateway owner ids by lease namespace, from the presence set. */
async function owners(): Promise<Map<string, string>> {
  const m = new Map<string, string>();
  for (const member of await redis.zrange('tgw:gateways', '0', '-1')) {
    const [owner, ns] = member.split(' ');
    m.set(ns!, owner!);
  }
  return m;
}

async function startEngineOn(h: Host): Promise<void> {
  // The engine takes the arguments Triton's KServe runtime passes (--model-store, ports, --allow-*).
  lab.exec(
    h,
    'engine',
    [
      'engine/main.ts',
      `--model-store=${repo}`,
      '--grpc-port=9000',
      '--http-port=8000',
      '--allow-grpc=true',
      '--allow-http=true',
      '--allow-client-shm=true',
    ],
    { ENGINE_QUIET: '1' },
    ROOT,
  );
  await waitFor(`${h.name} engine ready`, async () => (await fetch(`http://${h.ip}:8000/v2/health/ready`)).ok, 120_000, 100);
}

async function startGatewayOn(h: Host, fnDir: string): Promise<void> {
  lab.exec(
    h,
    'gateway',
    [
      'gateway/main.ts',
      '--port=8080',
      '--engine=127.0.0.1:9000',
      `--functions=${fnDir}`,
      '--shm-threshold=0',
      '--arena-regions=1',
      '--arena-region-bytes=1048576',
      `--lease-ttl-ms=${LEASE_TTL_MS}`,
      `--job-claim-idle-ms=${CLAIM_IDLE_MS}`,
      `--presence-ttl-ms=${PRESENCE_TTL_MS}`,
      '--jobs-concurrency=2',
    ],
    { REDIS_URL: redisUrl, GATEWAY_ADMIN_TOKEN: TOKEN, GATEWAY_WEBHOOK_SECRET: SECRET },
    ROOT,
  );
  await waitFor(`${h.name} gateway ready`, async () => (await fetch(`${gw(h)}/readyz`)).ok, 120_000, 100);
}

describe.skipIf(!!skipReason)('L0_multi_host: three hosts from namespaces, one Redis', () => {
  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), `mh-${process.pid}-`));
    lab = new Lab(work);
    process.on('exit', () => lab.tearDownSync());
    lab.setUpBridge();
    const port = await freePort();
    const rp = spawn(
      'redis-server',
      ['--bind', lab.gatewayIp, '--port', String(port), '--save', '', '--appendonly', 'no', '--protected-mode', 'no'],
      { stdio: 'ignore' },
    );
    lab.track(rp);
    redisUrl = `redis://${lab.gatewayIp}:${port}`;
    redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined); // refused until redis-server listens: waitFor retries
    await waitFor('redis', async () => (await redis.ping()) === 'PONG', 10_000);

    // The callback receiver (root namespace, on the bridge): slow enough that runners hold jobs for a while.
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        const id = String(req.headers['x-job-id']);
        const signed = signatureMatches(signBody(SECRET, body), req.headers['x-signature-256'] as string | undefined);
        const list = deliveries.get(id) ?? [];
        list.push({ at: Date.now(), signed, sum: JSON.parse(body).outputs?.sum?.data ?? [] });
        deliveries.set(id, list);
        setTimeout(() => res.writeHead(200).end(), 250);
      });
    });
    await new Promise<void>((r) => receiver.listen(0, lab.gatewayIp, r));
    callbackUrl = `http://${lab.gatewayIp}:${(receiver.address() as AddressInfo).port}/cb`;

    repo = tempRepo(`mh-repo-${process.pid}`, ['simple']);
    const fnDir = path.join(work, 'functions');
    fs.mkdirSync(fnDir);
    const quick = { callbackAllow: [callbackUrl], backoffMs: 50, maxBackoffMs: 200, attemptTimeoutMs: 5000, maxDeliveryAttempts: 20 };
    fs.writeFileSync(
      path.join(fnDir, 'adder.json'),
      JSON.stringify({ name: 'adder', target: { model: 'simple' }, outputs: { sum: 'OUTPUT0' }, async: quick }),
    );
    // Three hosts (lab.hosts in this order), their six processes started two at a time (each start is a core's
    // work for a while): host1's gateway first of the gateways, as it seeds the bundle store.
    const [h1, h2, h3] = [await lab.addHost(1), await lab.addHost(2), await lab.addHost(3)];
    await Promise.all([startEngineOn(h1), startEngineOn(h2)]);
    await Promise.all([startGatewayOn(h1, fnDir), startEngineOn(h3)]);
    await Promise.all([startGatewayOn(h2, fnDir), startGatewayOn(h3, fnDir)]);
  }, 400_000);

  afterAll(async () => {
    try {
      for (const h of lab?.hosts ?? []) {
        const tail = lab.logTail(h, 8).trim();
        if (tail) console.log(`--- ${h.name} log tail ---\n${tail}`);
      }
    } finally {
      redis?.disconnect();
      receiver?.closeAllConnections();
      receiver?.close();
      await lab?.tearDown();
      removeDir(repo);
      removeDir(work);
    }
  });

  it("every host stages through its own /dev/shm; no host sees another host's regions", async () => {
    const [h1, h2, h3] = lab.hosts as [Host, Host, Host];
    for (const h of lab.hosts) {
      const r = await post(h, 'adder');
      expect(r.status).toBe(200);
      expect(r.headers.get('x-payload-transfer')).toBe('shm');
      expect(((await r.json()) as Json).outputs.sum.data).toEqual(SUM);
    }
    const own = await owners();
    expect([...own.keys()].sort()).toEqual(['tgw:host1', 'tgw:host2', 'tgw:host3']);
    const rootShm = new Set(fs.readdirSync('/dev/shm'));
    for (const h of [h1, h2, h3]) {
      const mine = own.get(`tgw:${h.name}`)!;
      const files = lab.shmFiles(h).filter((f) => f.startsWith('tgw_'));
      expect(files).toEqual([`tgw_${mine}_0`]); // only its own gateway's region
      expect(rootShm.has(files[0]!)).toBe(false); // and not in the machine's /dev/shm
      const regions = (await (await fetch(`http://${h.ip}:8000/v2/systemsharedmemory/status`)).json()) as Json[];
      expect(regions.map((r) => r.name)).toEqual([`tgw_${mine}_0`]); // its engine knows only its own gateway's region
      expect(await redis.exists(`tgw:${h.name}:lease:tgw_${mine}_0`)).toBe(1);
    }
  });

  it('a deploy through one gateway is served by every gateway, by its change notice (sooner than the fallback poll)', async () => {
    const t0 = Date.now();
    const bundle = {
      version: `mh-${process.pid}`,
      functions: [
        {
          name: 'adder',
          target: { model: 'simple' },
          outputs: { sum: 'OUTPUT0' },
          async: { callbackAllow: [callbackUrl], backoffMs: 50, maxBackoffMs: 200, attemptTimeoutMs: 5000, maxDeliveryAttempts: 20 },
        },
        { name: 'subtractor', target: { model: 'simple' }, outputs: { diff: 'OUTPUT1' } },
      ],
    };
    const put = await admin(lab.hosts[0]!, 'PUT', bundle);
    expect(put.status).toBe(200);
    const seen = await Promise.all(
      lab.hosts.map(async (h) => {
        await waitFor(`${h.name} serves subtractor`, async () => (await post(h, 'subtractor')).status === 200, 60_000, 10);
        return Date.now() - t0;
      }),
    );
    console.log(`deploy via host1 served by all hosts after ${Math.max(...seen)} ms (${seen.join(', ')} ms)`);
    expect(Math.max(...seen)).toBeLessThan(DEPLOY_POLL_MS);
    const r = (await (await post(lab.hosts[2]!, 'subtractor')).json()) as Json;
    expect(r.outputs.diff.data).toEqual(INPUTS.inputs.INPUT0.map((v) => v - 3));
  });

  it('SIGKILL of a host holding jobs: survivors finish them, the client loses nothing, the dead host is reaped', async () => {
    const [h1, h2, h3] = lab.hosts as [Host, Host, Host];
    const deadOwner = (await owners()).get('tgw:host2')!;
    const accepted = new Set<string>();
    let syncOk = 0;
    let syncFailovers = 0;
    let syncErrors = 0;
    // A client spreading load over all three hosts; a connection failure goes to the next host (as a Service would).
    let stop = false;
    let turn = 0;
    const client = async (kind: 'async' | 'sync') => {
      while (!stop) {
        for (let tries = 0; tries < 3; tries++) {
          const h = lab.hosts[turn++ % 3]!;
          try {
            const r = kind === 'async' ? await postAsync(h) : await post(h, 'adder');
            if (kind === 'async' && r.status === 202) accepted.add(((await r.json()) as Json).id);
            else if (kind === 'sync' && r.status === 200 && ((await r.json()) as Json).outputs.sum.data.join() === SUM.join()) syncOk++;
            else syncErrors++;
            break;
          } catch {
            syncFailovers += kind === 'sync' ? 1 : 0; // never reached the gateway: not accepted, retried elsewhere
          }
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const load = Promise.all([client('async'), client('sync'), client('sync')]);
    // Jobs accepted by host2 itself, then wait until host2's runner holds some.
    for (let i = 0; i < 8; i++) {
      const r = await postAsync(h2);
      expect(r.status).toBe(202);
      accepted.add(((await r.json()) as Json).id);
    }
    const pendingOf = async (consumer: string) => {
      const p = (await redis.call('XPENDING', 'tgw:jobs:stream', 'runners', '-', '+', 100, consumer)) as Array<[string]>;
      const ids = await Promise.all(p.map(async ([entry]) => ((await redis.xrange('tgw:jobs:stream', entry, entry))[0]?.[1] ?? [])[1]));
      return ids.filter((id): id is string => !!id);
    };
    await waitFor('host2 holding jobs', async () => (await pendingOf(deadOwner)).length > 0, 60_000, 5);
    expect(await redis.keys('tgw:host2:lease:*')).not.toEqual([]);
    const tKill = Date.now();
    await lab.kill(h2);
    // What host2 held when it died: pending on its consumer, so only a survivor can finish these.
    const heldIds = await pendingOf(deadOwner);
    expect(heldIds.length).toBeGreaterThan(0);
    // The client keeps going across the kill until the survivors have served it some more.
    const okAtKill = syncOk;
    const acceptedAtKill = accepted.size;
    await waitFor('calls served after the kill', () => syncOk >= okAtKill + 10 && accepted.size >= acceptedAtKill + 5, 120_000, 20);
    stop = true;
    await load;

    // Every accepted job is delivered (at least once), signed, with the right result; what host2 held is
    // finished by a survivor (once its claim period has passed), and host2's consumer has nothing left pending.
    const survivorDelivered = (id: string) => !!deliveries.get(id)?.some((d) => d.at > tKill);
    await waitFor('every accepted job delivered', () => [...accepted].every((id) => deliveries.has(id)), 180_000, 50);
    await waitFor('the jobs host2 held delivered by a survivor', () => heldIds.every(survivorDelivered), 180_000, 50);
    await waitFor('nothing left pending on host2', async () => (await pendingOf(deadOwner)).length === 0, 120_000, 50);
    const recoveryMs = Math.max(...heldIds.map((id) => deliveries.get(id)![deliveries.get(id)!.length - 1]!.at)) - tKill;
    const unique = new Set([...deliveries.keys()].filter((id) => accepted.has(id)));
    const duplicates = [...accepted].reduce((n, id) => n + deliveries.get(id)!.length - 1, 0);
    expect(unique.size).toBe(accepted.size);
    for (const id of accepted) for (const d of deliveries.get(id)!) expect([d.signed, d.sum.join()]).toEqual([true, SUM.join()]);
    // The survivor records the delivery once the receiver has answered its callback.
    const status = async (id: string) => ((await (await fetch(`${gw(h1)}/jobs/${id}`)).json()) as Json).status;
    for (const id of heldIds) await waitFor(`job ${id} recorded as delivered`, async () => (await status(id)) === 'delivered', 60_000, 50);

    // The dead host's presence, leases and job consumer are reaped from Redis; the survivors' stay.
    await waitFor(
      'host2 reaped',
      async () => {
        const keys = await redis.keys('tgw:host2:*');
        const members = [...(await redis.zrange('tgw:gateways', '0', '-1')), ...(await redis.zrange('tgw:gateways:dead', '0', '-1'))];
        const consumers = ((await redis.call('XINFO', 'CONSUMERS', 'tgw:jobs:stream', 'runners')) as unknown[][]).map((c) => String(c[1]));
        return !keys.length && !members.some((m) => m.includes(deadOwner)) && !consumers.includes(deadOwner);
      },
      120_000,
      100,
    );
    const reapMs = Date.now() - tKill;
    expect((await owners()).size).toBe(2);
    for (const h of [h1, h3]) {
      expect(await redis.keys(`tgw:${h.name}:lease:*`)).toHaveLength(1);
      expect((await post(h, 'adder')).headers.get('x-payload-transfer')).toBe('shm');
    }
    console.log(
      `multi-host kill: jobs accepted ${accepted.size} (host2 held ${heldIds.length} at the kill), completed ${unique.size}, ` +
        `duplicate callbacks ${duplicates} (deduplicated on X-Job-Id); recovery ${recoveryMs} ms; host2 reaped from Redis after ${reapMs} ms; ` +
        `sync calls ok ${syncOk}, failed over ${syncFailovers}, errors ${syncErrors}`,
    );
    expect(syncErrors).toBe(0);
    expect(syncOk).toBeGreaterThan(0);
  }, 480_000);
});
