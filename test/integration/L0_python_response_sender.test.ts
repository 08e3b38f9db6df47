// A python model's response sender, decoupled or not, on real stubs over a
// real gRPC stream, after the cases of Triton's L0_backend_python
// response_sender test (each case run on a model whose execute is plain and
// one whose execute is async, as there): a plain (non-decoupled) model may
// answer a request by returning its response or by sending exactly one
// response through its sender, before, while or after execute returns; a
// second response, a final flag before any response, or a response returned
// after one was sent are refused with Triton's texts, and the client sees
// what Triton's clients see (the first response, or the error). Also unary
// gRPC and HTTP on a plain model whose sender answers after execute returned,
// and the instance free for other requests meanwhile.
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { httpJson, type ProtoClient } from './helpers.ts';
import { pythonRepo, pythonEngine } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { SENDER_ASYNC, SENDER_MISUSE, SENDER_MISUSE_CONFIG, SENDER_SYNC, senderConfig } from './python-response-sender-models.ts';

let eng: RunningEngine;
let client: ProtoClient;

const variants: Record<string, { config: string; model: string }> = {
  sender_misuse: { config: SENDER_MISUSE_CONFIG, model: SENDER_MISUSE },
};
for (const decoupled of [false, true]) {
  for (const asyncExec of [false, true]) {
    for (const batching of [false, true]) {
      const name = `response_sender${decoupled ? '_decoupled' : ''}${asyncExec ? '_async' : ''}${batching ? '_batching' : ''}`;
      variants[name] = { config: senderConfig(name, decoupled, batching), model: asyncExec ? SENDER_ASYNC : SENDER_SYNC };
    }
  }
}

pythonEngine(
  () => pythonRepo('l0-py-sender', [], variants),
  (s) => ({ eng, client } = s),
);

/** What one request asks of the model. */
interface Plan {
  before: number;
  finalBefore: boolean;
  returns: boolean;
  after: number;
  finalAfter: boolean;
}
const plan = (before: number, finalBefore: boolean, returns: boolean, after: number, finalAfter: boolean): Plan => ({
  before,
  finalBefore,
  returns,
  after,
  finalAfter,
});

// The response_sender test's input sets, by its names.
const ZERO_PRE = plan(0, true, false, 0, false);
const ZERO_POST = plan(0, false, false, 0, true);
const ONE_PRE = plan(1, true, false, 0, false);
const ONE_POST = plan(0, false, false, 1, true);
const TWO_PRE = plan(2, true, false, 0, false);
const TWO_POST = plan(0, false, false, 2, true);
const PRE_AND_POST = plan(1, false, false, 3, true);
const ON_RETURN = plan(0, false, true, 0, false);
const PRE_AND_ON = plan(1, true, true, 0, false);
const ON_AND_POST = plan(0, false, true, 1, true);

const u8 = (v: number) => Buffer.from([v]);
function request(model: string, p: Plan) {
  const input = (name: string, datatype: string) => ({ name, datatype, shape: [1, 1] });
  return {
    model_name: model,
    inputs: [
      input('NUMBER_OF_RESPONSE_BEFORE_RETURN', 'UINT8'),
      input('SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN', 'BOOL'),
      input('RETURN_A_RESPONSE', 'BOOL'),
      input('NUMBER_OF_RESPONSE_AFTER_RETURN', 'UINT8'),
      input('SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN', 'BOOL'),
    ],
    raw_input_contents: [u8(p.before), u8(+p.finalBefore), u8(+p.returns), u8(p.after), u8(+p.finalAfter)],
  };
}

type StreamMsg = { error_message: string; infer_response: { raw_output_contents: Buffer[] } };
/** Every message of one ModelStreamInfer stream that carried `plans`: an INDEX value or an error text. */
function stream(model: string, plans: Plan[]): Promise<Array<number | string>> {
  const got: Array<number | string> = [];
  return new Promise((resolve, reject) => {
    const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, StreamMsg>;
    call.on('data', (m) => {
      if (m.error_message) return got.push(m.error_message);
      const raw = m.infer_response.raw_output_contents?.[0];
      // A batch-1 request's INDEX is one UINT16.
      if (raw) got.push(raw.readUInt16LE(0));
    });
    call.on('error', reject);
    call.on('end', () => resolve(got));
    for (const p of plans) call.write(request(model, p));
    call.end();
  });
}

/** How many responses of each kind a stream carried (Triton's test's tally); errors listed apart. */
function tally(got: Array<number | string>) {
  const t = { before: 0, returned: 0, after: 0, errors: [] as string[] };
  for (const v of got) {
    if (typeof v === 'string') t.errors.push(v);
    else if (v < 1000) t.returned++;
    else if (v < 2000) t.before++;
    else if (v < 3000) t.after++;
  }
  return t;
}
const expected = (before: number, returned: number, after: number) => ({ before, returned, after, errors: [] });

const plainModels = ['response_sender', 'response_sender_async'];
const decoupledModels = ['response_sender_decoupled', 'response_sender_decoupled_async'];

describe('L0_python_response_sender: non-decoupled', () => {
  it.each(plainModels)('%s: one response on return', async (m) => {
    expect(tally(await stream(m, [ON_RETURN]))).toEqual(expected(0, 1, 0));
  });

  it.each(plainModels)('%s: one response sent before return, with the final flag', async (m) => {
    expect(tally(await stream(m, [ONE_PRE]))).toEqual(expected(1, 0, 0));
  });

  it.each(plainModels)('%s: one response sent after return, with the final flag', async (m) => {
    expect(tally(await stream(m, [ONE_POST]))).toEqual(expected(0, 0, 1));
  });

  it.each(plainModels)("%s: the final flag before any response fails the request with Triton's text", async (m) => {
    const t = tally(await stream(m, [ZERO_PRE]));
    expect(t.errors).toHaveLength(1);
    expect(t.errors[0]).toContain('Non-decoupled model cannot send complete final before sending a response');
    expect([t.before, t.returned, t.after]).toEqual([0, 0, 0]);
  });

  it.each(plainModels)('%s: two responses before return: the first reaches the client, the second is refused', async (m) => {
    expect(tally(await stream(m, [TWO_PRE]))).toEqual(expected(1, 0, 0));
  });

  it.each(plainModels)('%s: one sent, then one returned: only the sent one', async (m) => {
    expect(tally(await stream(m, [PRE_AND_ON]))).toEqual(expected(1, 0, 0));
  });

  it.each(plainModels)('%s: one returned, then one sent after return: only the returned one', async (m) => {
    expect(tally(await stream(m, [ON_AND_POST]))).toEqual(expected(0, 1, 0));
  });

  it.each(['response_sender_batching', 'response_sender_async_batching'])(
    '%s: requests of one batch each answered its own way',
    async (m) => {
      const before = eng.server.modelStatistics(m)[0]!.execution_count;
      expect(tally(await stream(m, [ON_RETURN, ONE_PRE, ONE_POST]))).toEqual(expected(1, 1, 1));
      // The three came within the 0.2 s window: one batch, as in Triton's test.
      expect(eng.server.modelStatistics(m)[0]!.execution_count - before).toBe(1);
    },
  );

  it("the sender's misuses raise Triton's texts inside the model", async () => {
    const call = () =>
      client.call('ModelInfer', {
        model_name: 'sender_misuse',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
        raw_input_contents: [Buffer.alloc(4)],
      });
    const texts = (r: { raw_output_contents?: Buffer[] }) => {
      const out: string[] = [];
      const b = r.raw_output_contents![0]!;
      for (let at = 0; at < b.length; ) {
        const n = b.readUInt32LE(at);
        out.push(b.subarray(at + 4, at + 4 + n).toString());
        at += 4 + n;
      }
      return out;
    };
    expect(texts(await call())).toEqual([
      'Unable to send response. Unsupported flag provided.',
      'Inference Response object must be provided when the response flags is set to zero.',
      'Unable to send response. Non-decoupled model cannot send complete final before sending a response.',
    ]);
    expect(texts(await call()).slice(3)).toEqual([
      'Unable to send response. Non-decoupled model cannot send more than one response.',
      'then final: no error',
      'Unable to send response. Response sender has been closed.',
    ]);
  });

  it('unary gRPC and HTTP wait for a response sent after execute returned; the instance serves others meanwhile', async () => {
    const t0 = Date.now();
    const slow = client.call('ModelInfer', request('response_sender', ONE_POST));
    // Sent while the first waits for its sender (0.3 s): answered at once, the instance being free.
    const quick = await client.call('ModelInfer', request('response_sender', ON_RETURN));
    const quickMs = Date.now() - t0;
    expect(quick.raw_output_contents[0].readUInt16LE(0)).toBe(0);
    expect((await slow).raw_output_contents[0].readUInt16LE(0)).toBe(2000);
    expect(quickMs).toBeLessThan(Date.now() - t0);
    const input = (name: string, datatype: string, v: number | boolean) => ({ name, datatype, shape: [1, 1], data: [v] });
    const http = await httpJson(eng.httpPort, 'POST', '/v2/models/response_sender_async/infer', {
      inputs: [
        input('NUMBER_OF_RESPONSE_BEFORE_RETURN', 'UINT8', 0),
        input('SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN', 'BOOL', false),
        input('RETURN_A_RESPONSE', 'BOOL', false),
        input('NUMBER_OF_RESPONSE_AFTER_RETURN', 'UINT8', 1),
        input('SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN', 'BOOL', true),
      ],
    });
    expect(http.status).toBe(200);
    expect((http.json.outputs as Array<{ name: string; data: number[] }>)[0]).toMatchObject({ name: 'INDEX', data: [2000] });
  });
});

describe('L0_python_response_sender: decoupled', () => {
  it.each([
    ['zero responses, final before return', ZERO_PRE, expected(0, 0, 0)],
    ['zero responses, final after return', ZERO_POST, expected(0, 0, 0)],
    ['one response before return', ONE_PRE, expected(1, 0, 0)],
    ['one response after return', ONE_POST, expected(0, 0, 1)],
    ['two responses before return', TWO_PRE, expected(2, 0, 0)],
    ['two responses after return', TWO_POST, expected(0, 0, 2)],
    ['one before and three after return', PRE_AND_POST, expected(1, 0, 3)],
  ])('%s', async (_, p, want) => {
    for (const m of decoupledModels) expect(tally(await stream(m, [p]))).toEqual(want);
  });

  it('requests of one batch each responding differently', async () => {
    const all = [ZERO_PRE, ZERO_POST, ONE_PRE, ONE_POST, TWO_PRE, TWO_POST, PRE_AND_POST];
    for (const m of ['response_sender_decoupled_batching', 'response_sender_decoupled_async_batching']) {
      expect(tally(await stream(m, all))).toEqual(expected(4, 0, 6));
    }
  });

  it("a response returned from a decoupled execute is Triton's error", async () => {
    const t = tally(await stream('response_sender_decoupled', [ON_RETURN]));
    expect(t.errors).toHaveLength(1);
    expect(t.errors[0]).toContain('using the decoupled mode and the execute function must return None');
  });

  it('one sent with the final flag, then one returned: the sent one only (the error finds the request closed)', async () => {
    expect(tally(await stream('response_sender_decoupled', [PRE_AND_ON]))).toEqual(expected(1, 0, 0));
  });

  it('one returned, then one sent after return: the error only', async () => {
    const got = await stream('response_sender_decoupled', [ON_AND_POST]);
    expect(got).toHaveLength(1);
    expect(String(got[0])).toContain('using the decoupled mode and the execute function must return None');
  });
});
