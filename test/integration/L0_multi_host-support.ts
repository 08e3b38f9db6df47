// "Hosts" made from Linux namespaces on one machine, for the multi-host suite.
// Not a test file itself.
//
// Each host is an anchor process (`sleep`) in its own network namespace
// (veth to a bridge in the root namespace), its own mount namespace with a
// private tmpfs on /dev/shm (as a pod's memory-backed emptyDir), and its own
// UTS namespace (hostname hostN, so the gateway's lease namespace is
// `tgw:hostN`, as a pod's hostname makes it on Kubernetes). Engine and
// gateway enter the anchor's namespaces with nsenter, so the pids we hold are
// the node processes themselves. Every name carries this process's pid; the
// 10.x subnet lives only on the bridge and the namespaces made here.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
const tryRun = (cmd: string, args: string[]) => {
  try {
    run(cmd, args);
  } catch {
    /* already gone */
  }
};

/** Why namespaces cannot be made here, or undefined when they can. */
export function namespacesUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root (ip netns needs CAP_SYS_ADMIN and CAP_NET_ADMIN)';
  const probe = `tgprobe${process.pid}`;
  try {
    run('ip', ['netns', 'add', probe]);
    run('ip', ['netns', 'exec', probe, 'unshare', '-m', '-u', 'true']);
  } catch (e) {
    return `namespaces not permitted: ${(e as Error).message.split('\n')[0]}`;
  } finally {
    tryRun('ip', ['netns', 'del', probe]);
  }
  return undefined;
}

export interface Host {
  name: string;
  ns: string;
  ip: string;
  anchor: ChildProcess;
  procs: Map<string, ChildProcess>;
  logFile: string;
}

/** A bridge in the root namespace and up to a few hosts hanging off it. */
export class Lab {
  readonly bridge: string;
  readonly subnet: string;
  readonly hosts: Host[] = [];
  private readonly extra: ChildProcess[] = [];
  private readonly namespaces: string[] = [];

  constructor(readonly logDir: string) {
    const pid = process.pid;
    this.bridge = `tgbr${pid}`.slice(0, 15);
    this.subnet = `10.${200 + (pid % 50)}.${Math.floor(pid / 50) % 250}`;
  }

  /** The bridge's own address (Redis and the callback receiver bind it). */
  get gatewayIp(): string {
    return `${this.subnet}.1`;
  }

  setUpBridge(): void {
    run('ip', ['link', 'add', this.bridge, 'type', 'bridge']);
    run('ip', ['addr', 'add', `${this.gatewayIp}/24`, 'dev', this.bridge]);
    run('ip', ['link', 'set', this.bridge, 'up']);
  }

  /** Make host n (1-based): netns + veth + mount/UTS namespaces with a private tmpfs /dev/shm. */
  async addHost(n: number): Promise<Host> {
    const name = `host${n}`;
    const ns = `tg${process.pid}h${n}`;
    const outer = `tgv${process.pid}h${n}`.slice(0, 15);
    const ip = `${this.subnet}.${10 + n}`;
    run('ip', ['netns', 'add', ns]);
    this.namespaces.push(ns);
    run('ip', ['link', 'add', outer, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    run('ip', ['link', 'set', outer, 'master', this.bridge, 'up']);
    run('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
    run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    const logFile = path.join(this.logDir, `${name}.log`);
    const script = `mount -t tmpfs -o size=64m tmpfs /dev/shm && hostname ${name} && echo anchored && exec sleep 3600`;
    const anchor = spawn('ip', ['netns', 'exec', ns, 'unshare', '-m', '-u', 'sh', '-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      anchor.stdout!.once('data', () => resolve());
      anchor.once('exit', (c) => reject(new Error(`host ${name} anchor exited with ${c}`)));
    });
    const host: Host = { name, ns, ip, anchor, procs: new Map(), logFile };
    this.hosts.push(host);
    return host;
  }

  /** Run `node --import tsx <args>` inside a host's namespaces, output appended to its log. */
  exec(host: Host, label: string, args: string[], env: Record<string, string>, cwd: string): ChildProcess {
    const fd = fs.openSync(host.logFile, 'a');
    const p = spawn(
      'nsenter',
      ['-t', String(host.anchor.pid), '-m', '-u', '-n', `--wd=${cwd}`, '--', process.execPath, '--import', 'tsx', ...args],
      {
        cwd,
        env: { ...process.env, ...env },
        stdio: ['ignore', fd, fd],
      },
    );
    fs.closeSync(fd);
    host.procs.set(label, p);
    return p;
  }

  /** A process in the root namespace that must die with the lab (Redis). */
  track(p: ChildProcess): void {
    this.extra.push(p);
  }

  /** SIGKILL a host: its engine, gateway and anchor (its /dev/shm goes with its mount namespace). */
  async kill(host: Host): Promise<void> {
    const all = [...host.procs.values(), host.anchor];
    await Promise.all(all.map((p) => killWait(p)));
  }

  /** Files in a host's private /dev/shm, seen through its anchor's root. */
  shmFiles(host: Host): string[] {
    return fs.readdirSync(`/proc/${host.anchor.pid}/root/dev/shm`);
  }

  logTail(host: Host, n = 30): string {
    try {
      return fs.readFileSync(host.logFile, 'utf8').split('\n').slice(-n).join('\n');
    } catch {
      return '';
    }
  }

  /** Kill everything started here and delete every namespace and link. Safe to call twice. */
  async tearDown(): Promise<void> {
    for (const h of this.hosts) await this.kill(h).catch(() => undefined);
    for (const p of this.extra) await killWait(p).catch(() => undefined);
    this.deleteLinks();
  }

  /** Last resort at process exit (no awaiting possible): SIGKILL all, delete namespaces and links. */
  tearDownSync(): void {
    for (const p of [...this.hosts.flatMap((h) => [...h.procs.values(), h.anchor]), ...this.extra]) {
      if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    }
    this.deleteLinks();
  }

  private deleteLinks(): void {
    // Deleting a namespace destroys its end of the veth pair, and with it the pair.
    for (const ns of this.namespaces.splice(0)) tryRun('ip', ['netns', 'del', ns]);
    tryRun('ip', ['link', 'del', this.bridge]);
  }
}

function killWait(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    p.once('exit', () => resolve());
    p.kill('SIGKILL');
  });
}
