// One attack of the attack suite in a process of its own (soak-attacks.ts
// spawns it), so that building and writing the flood does not delay the
// measuring client's calls: `soak-attack-child.ts NAME GRPC_PORT HTTP_PORT
// WINDOW_MS`. It loads, connects and builds what the attack needs first, then
// prints `ready` and waits for `go` on stdin, so that its own start-up (node,
// tsx, the modules) falls outside the window in which the parent measures the
// other client. After `go` it sustains the attack for WINDOW_MS: each time
// the engine cuts it (or it has sent all its units) it reconnects and starts
// again, so the other client is measured over the whole window rather than
// over one burst. Each HTTP/2 attack connects from a loopback address of its
// own (attackerAddress in the fixture), so the engine's reconnect penalty
// falls on it and not on the measuring client. Slowloris runs once (20 s: the header deadline is 15 s).
// The result comes as one JSON line on stdout.
import { createInterface } from 'node:readline';
import { pipelineFlood, prepareH2Attack, slowloris, type AttackResult, type H2AttackName } from '../fixtures/h2-attacks.ts';

const [name, grpc, http, windowArg] = process.argv.slice(2) as [string, string, string, string];
const windowMs = Number(windowArg ?? 3000);
const body =
  '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"data":[1]},{"name":"INPUT1","datatype":"INT32","shape":[1,1],"data":[2]}]}';
const httpCall = `POST /v2/models/simple/infer HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

/** What one round of an attack did: units sent, the engine's answer, when it cut the round (ms), how far the engine got. */
interface Round {
  sent: number;
  answer: string;
  cutMs?: number;
  lastStream?: number;
}

/** The first round, prepared as far as it can be without sending any of it, and how to prepare the next ones. */
async function prepare(): Promise<{ first: () => Promise<Round>; again: () => Promise<() => Promise<Round>> }> {
  if (name === 'pipeline-flood') {
    const round = async (): Promise<Round> => {
      const r = await pipelineFlood(Number(http), httpCall, 20_000);
      return { sent: r.sent, answer: `${r.answered} answered` };
    };
    return { first: round, again: async () => round };
  }
  const h2 = async () => {
    const attack = await prepareH2Attack(name as H2AttackName, Number(grpc));
    return async (): Promise<Round> => {
      const r: AttackResult = await attack.go();
      return { sent: r.sent, answer: r.answer, cutMs: r.cutMs, lastStream: r.lastStream };
    };
  };
  return { first: await h2(), again: h2 };
}

/** Resolves at the first `go` line on stdin. */
function go(): Promise<void> {
  const lines = createInterface({ input: process.stdin });
  return new Promise((resolve) =>
    lines.on('line', (l) => {
      if (l.trim() !== 'go') return;
      lines.close();
      resolve();
    }),
  );
}

const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] : undefined);

void (async () => {
  if (name === 'slowloris') {
    const started = go();
    process.stdout.write('ready\n');
    await started;
    const r = await slowloris(Number(http), 200, 100, 20_000);
    process.stdout.write(
      `${JSON.stringify({ rounds: 1, sent: r.opened, answer: `${r.closedByServer} of ${r.opened} closed by the server in 20 s` })}\n`,
    );
    process.exit(0);
  }
  const { first, again } = await prepare();
  const started = go();
  process.stdout.write('ready\n');
  await started;
  const until = performance.now() + windowMs;
  const rounds: Round[] = [await first()];
  // A reconnect the engine holds back (its flood penalty) past the window ends the attack there: the window measured
  // stays WINDOW_MS (plus the last round), never stretched by the attacker's own wait.
  for (let left = until - performance.now(); left > 0; left = until - performance.now()) {
    const next = await Promise.race([again(), new Promise<undefined>((r) => setTimeout(r, left, undefined))]);
    if (!next) break;
    rounds.push(await next());
  }
  const answers = new Map<string, number>();
  for (const r of rounds) answers.set(r.answer, (answers.get(r.answer) ?? 0) + 1);
  const last = rounds.map((r) => r.lastStream).filter((s) => s !== undefined);
  const out = {
    rounds: rounds.length,
    sent: `${rounds.reduce((n, r) => n + r.sent, 0)} in ${rounds.length} rounds${last.length ? `, streams to ${median(last)} processed (median)` : ''}`,
    answer: [...answers].map(([a, n]) => (answers.size === 1 && n === rounds.length ? a : `${a} (${n})`)).join('; '),
    cutMs: median(rounds.map((r) => r.cutMs).filter((c) => c !== undefined)),
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
})();
