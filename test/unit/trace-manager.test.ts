// Trace settings and sampling (Triton's trace extension) and the trace file
// format, without servers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { TraceManager, traceSettingsFromFlags } from '../../engine/tracing/trace-manager.ts';
import { RequestTrace } from '../../engine/api/request-trace.ts';
import { traceToJson } from '../../engine/tracing/trace-file-writer.ts';

describe('traceSettingsFromFlags', () => {
  it("reads Triton's --trace-config forms", () => {
    expect(
      traceSettingsFromFlags([
        'triton,file=/tmp/t.json',
        'level=TIMESTAMPS',
        'level=TENSORS',
        'rate=5',
        'count=10',
        'triton,log-frequency=50',
      ]),
    ).toEqual({
      trace_file: ['/tmp/t.json'],
      trace_level: ['TIMESTAMPS', 'TENSORS'],
      trace_rate: ['5'],
      trace_count: ['10'],
      log_frequency: ['50'],
    });
    expect(traceSettingsFromFlags(['mode=opentelemetry', 'opentelemetry,url=http://h:4318/v1/traces'])).toEqual({
      trace_mode: ['opentelemetry'],
      opentelemetry_url: ['http://h:4318/v1/traces'],
    });
    expect(() => traceSettingsFromFlags(['rate=0'])).toThrow(/trace_rate' must be an integer >= 1/);
    expect(() => traceSettingsFromFlags(['bogus=1'])).toThrow(/unknown setting 'bogus'/);
  });
});

describe('TraceManager', () => {
  it('samples every rate-th request, counts down trace_count, and traces ensemble steps with their parent', () => {
    const m = new TraceManager({ trace_level: ['TIMESTAMPS'], trace_rate: ['2'], trace_count: ['2'] });
    const got = [0, 1, 2, 3, 4, 5].map(() => m.begin('a', '1', undefined, undefined, undefined, 0n));
    expect(got.map((t) => !!t)).toEqual([true, false, true, false, false, false]);
    expect(m.settings().trace_count).toEqual(['0']);
    const parent = got[0]!;
    const child = m.begin('b', '1', undefined, parent, undefined, 0n);
    expect([child?.parent, parent.children]).toEqual([parent, 1]);
  });

  it('keeps per-model overrides; an empty value clears one', () => {
    const m = new TraceManager();
    expect(m.update('a', { trace_level: ['timestamps'] }).trace_level).toEqual(['TIMESTAMPS']);
    expect(m.settings().trace_level).toEqual(['OFF']);
    expect(m.begin('a', '1', undefined, undefined, undefined, 0n)).toBeDefined();
    expect(m.update('a', { trace_level: [] }).trace_level).toEqual(['OFF']);
    expect(() => m.update(undefined, { nope: ['1'] })).toThrow(/unknown trace setting 'nope'/);
  });

  it('writes log_frequency-sized chunks to <file>.<n>', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `tm-${process.pid}-`));
    const file = path.join(dir, 't.json');
    const m = new TraceManager({ trace_level: ['TIMESTAMPS'], trace_rate: ['1'], trace_file: [file], log_frequency: ['2'] });
    for (let i = 0; i < 3; i++) m.end(m.begin('a', '1', `r${i}`, undefined, undefined, 0n)!);
    expect(JSON.parse(fs.readFileSync(`${file}.0`, 'utf8')).map((t: { request_id: string }) => t.request_id)).toEqual(['r0', 'r1']);
    expect(fs.existsSync(`${file}.1`)).toBe(false);
    m.flush();
    expect(JSON.parse(fs.readFileSync(`${file}.1`, 'utf8')).map((t: { request_id: string }) => t.request_id)).toEqual(['r2']);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('RequestTrace', () => {
  it('back-dates compute activities from the execution timing and keeps timestamps in order', () => {
    const t = new RequestTrace(1, 'm', '2', 'req', undefined, undefined, false);
    t.mark('REQUEST_START', 1000n);
    t.mark('QUEUE_START', 1100n);
    t.executed({ computeInputNs: 100, computeInferNs: 500, computeOutputNs: 50 }, 2000n);
    t.mark('REQUEST_END', 1900n); // a clock read earlier than the last mark never goes backwards
    expect(traceToJson(t)).toEqual([
      {
        id: 1,
        model_name: 'm',
        model_version: 2,
        request_id: 'req',
        timestamps: [
          { name: 'REQUEST_START', ns: 1000 },
          { name: 'QUEUE_START', ns: 1100 },
          { name: 'COMPUTE_START', ns: 1350 },
          { name: 'COMPUTE_INPUT_END', ns: 1450 },
          { name: 'COMPUTE_OUTPUT_START', ns: 1950 },
          { name: 'COMPUTE_END', ns: 2000 },
          { name: 'REQUEST_END', ns: 2000 },
        ],
      },
    ]);
  });
});
