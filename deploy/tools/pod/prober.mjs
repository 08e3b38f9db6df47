// Runs inside the simulated pods' network namespace (`ip netns exec <ns> node
// prober.mjs`) and makes the requests the simulation asks for on stdin, one
// JSON line each, answering one JSON line each on stdout:
//   {"id":1,"kind":"http","url":"http://127.0.0.1:8000/v2/health/ready","timeoutMs":1000}
//     -> {"id":1,"status":200,"body":"..."}   (or {"id":1,"error":"..."})
//   {"id":2,"kind":"tcp","port":6379,"timeoutMs":1000} -> {"id":2,"ok":true}
// http requests may carry method, headers and body. Plain JavaScript, so it
// starts without a TypeScript loader.
import net from 'node:net';
import readline from 'node:readline';

const reply = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

async function http(r) {
  const res = await fetch(r.url, {
    method: r.method ?? 'GET',
    headers: r.headers,
    body: r.body,
    signal: AbortSignal.timeout(r.timeoutMs ?? 1000),
  });
  return { status: res.status, body: (await res.text()).slice(0, 65536) };
}

function tcp(r) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port: r.port });
    const done = (ok, error) => {
      s.destroy();
      resolve(ok ? { ok } : { ok, error });
    };
    s.setTimeout(r.timeoutMs ?? 1000, () => done(false, 'timeout'));
    s.on('connect', () => done(true));
    s.on('error', (e) => done(false, e.code ?? e.message));
  });
}

readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  let r;
  try {
    r = JSON.parse(line);
    reply({ id: r.id, ...(r.kind === 'tcp' ? await tcp(r) : await http(r)) });
  } catch (e) {
    reply({ id: r?.id, error: e?.cause?.code ?? e?.message ?? String(e) });
  }
});
