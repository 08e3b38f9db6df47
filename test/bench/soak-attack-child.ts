// One attack of the attack suite in a process of its own (soak-attacks.ts
// spawns it), so that building and writing the flood does not delay the
// measuring client's calls: `soak-attack-child.ts NAME GRPC_PORT HTTP_PORT`,
// the result as one JSON line on stdout.
import { H2_ATTACKS, pipelineFlood, slowloris, type H2AttackName } from '../fixtures/h2-attacks.ts';

const [name, grpc, http] = process.argv.slice(2) as [string, string, string];
const body =
  '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"data":[1]},{"name":"INPUT1","datatype":"INT32","shape":[1,1],"data":[2]}]}';
const httpCall = `POST /v2/models/simple/infer HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

async function run(): Promise<object> {
  if (name === 'slowloris') {
    const r = await slowloris(Number(http), 200, 100, 20_000);
    return { sent: r.opened, answer: `${r.closedByServer} of ${r.opened} closed by the server in 20 s` };
  }
  if (name === 'pipeline-flood') {
    const r = await pipelineFlood(Number(http), httpCall, 20_000);
    return { sent: r.sent, answer: `${r.answered} answered` };
  }
  const r = await H2_ATTACKS[name as H2AttackName](Number(grpc));
  // How far it got on the engine's side: the last stream its GOAWAY says it processed.
  return r.lastStream === undefined ? r : { ...r, sent: `${r.sent} written, streams to ${r.lastStream} processed` };
}

void run().then((r) => {
  process.stdout.write(`${JSON.stringify(r)}\n`);
  process.exit(0);
});
