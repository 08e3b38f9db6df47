// The simulation's side of prober.mjs: one prober process inside the pods'
// network namespace, requests over its stdin, answers matched by id.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface HttpAnswer {
  status?: number;
  body?: string;
  error?: string;
}

export class Prober {
  private readonly proc: ChildProcess;
  private next = 1;
  private readonly waiting = new Map<number, (a: Record<string, any>) => void>();

  constructor(netns: string) {
    const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'prober.mjs');
    this.proc = spawn('ip', ['netns', 'exec', netns, process.execPath, script], { stdio: ['pipe', 'pipe', 'inherit'] });
    readline.createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      const a = JSON.parse(line) as Record<string, any>;
      this.waiting.get(a.id)?.(a);
      this.waiting.delete(a.id);
    });
    this.proc.on('exit', () => {
      for (const w of this.waiting.values()) w({ error: 'prober exited' });
      this.waiting.clear();
    });
  }

  private ask(req: Record<string, unknown>): Promise<Record<string, any>> {
    const id = this.next++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.proc.stdin!.write(`${JSON.stringify({ id, ...req })}\n`);
    });
  }

  /** An HTTP request to 127.0.0.1:`port` inside the namespace. */
  http(
    port: number,
    p: string,
    o: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
  ): Promise<HttpAnswer> {
    return this.ask({ kind: 'http', url: `http://127.0.0.1:${port}${p}`, ...o }) as Promise<HttpAnswer>;
  }

  /** Whether 127.0.0.1:`port` inside the namespace accepts a TCP connection. */
  async tcp(port: number, timeoutMs = 1000): Promise<boolean> {
    return !!(await this.ask({ kind: 'tcp', port, timeoutMs })).ok;
  }

  close(): void {
    this.proc.stdin!.end();
    this.proc.kill('SIGKILL');
  }
}
