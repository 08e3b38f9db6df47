// `node --import tsx test/bench/cpu-profile-summary.ts FILE.cpuprofile [--top=25] [--skip-ms=3000]`:
// where a process's CPU went, from a V8 CPU profile (node --cpu-prof): busy
// time by owner, each sample charged to the nearest frame up its stack that
// belongs to a library or to our code (so Node's http parser or socket
// writes under Hono's adapter count as Hono's, under the gRPC client as the
// client's), and the top functions by self time. Samples in the first
// --skip-ms (start-up: module loading) are left out. Used for
// docs/gateway/performance.md's profile of the small call.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
  parent?: Node;
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

/** The owner of a frame, by its script URL (or V8's pseudo-frames). */
export function owner(fn: string, url: string): string {
  if (fn === '(idle)') return '(idle)';
  if (fn === '(garbage collector)') return 'GC';
  if (fn === '(program)') return '(program: native, not attributed)';
  if (url.includes('/node_modules/hono/')) return 'hono';
  if (url.includes('@hono/node-server')) return '@hono/node-server';
  if (url.includes('@grpc/grpc-js')) return 'grpc-js';
  if (url.includes('prom-client')) return 'prom-client';
  if (url.includes('protobufjs') || url.includes('/protocol/')) return 'protocol (messages, codec)';
  if (url.includes('/client/')) return 'client/ (gRPC client)';
  if (url.includes('/gateway/')) return 'gateway/';
  if (url.includes('/engine/')) return url.includes('onnxruntime') ? 'engine/ (onnxruntime backend)' : 'engine/';
  if (url.includes('onnxruntime')) return 'onnxruntime-node';
  if (url.includes('/common/')) return 'common/';
  if (url.includes('node_modules/zod')) return 'zod';
  if (/node:(_http|http)/.test(url)) return 'node http';
  if (/node:(net|_stream|stream|internal\/streams)|internal\/streams/.test(url)) return 'node net/streams';
  if (/node:internal\/http2|node:http2/.test(url)) return 'node http2';
  if (url.startsWith('node:')) return 'node (other)';
  if (url === '') return `(native: ${fn || 'anonymous'})`;
  return 'other JS';
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '25' }, 'skip-ms': { type: 'string', default: '3000' } },
  });
  const p = JSON.parse(readFileSync(positionals[0]!, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  for (const n of p.nodes) for (const c of n.children ?? []) byId.get(c)!.parent = n;
  const self = new Map<number, number>();
  const skipUs = Number(values['skip-ms']) * 1000;
  let t = 0;
  p.samples.forEach((id, i) => {
    t += p.timeDeltas[i] ?? 0;
    if (t >= skipUs) self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
  });
  /** The owner charged for a leaf: the nearest frame up the stack owned by a library or our code. */
  const charged = (leaf: Node): string => {
    const own = owner(leaf.callFrame.functionName, leaf.callFrame.url);
    if (own === 'GC' || own === '(idle)' || own.startsWith('(program')) return own;
    for (let n: Node | undefined = leaf; n; n = n.parent) {
      const o = owner(n.callFrame.functionName, n.callFrame.url);
      if (!o.startsWith('node') && !o.startsWith('(native') && o !== 'other JS') return o;
    }
    return own;
  };
  let busy = 0;
  const groups = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const o = charged(n);
    if (o === '(idle)') continue;
    busy += us;
    groups.set(o, (groups.get(o) ?? 0) + us);
    const k = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(gateway|client|protocol)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;
    fns.set(k, (fns.get(k) ?? 0) + us);
  }
  const pct = (us: number) => ((100 * us) / busy).toFixed(1).padStart(5);
  process.stdout.write(`busy ${(busy / 1000).toFixed(0)} ms\n`);
  for (const [g, us] of [...groups].sort((a, b) => b[1] - a[1])) process.stdout.write(`${pct(us)} %  ${g}\n`);
  process.stdout.write('\ntop functions by self time:\n');
  for (const [f, us] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) process.stdout.write(`${pct(us)} %  ${f}\n`);
}

main();
