// common/logger.ts, the one logger of both processes: engine and gateway
// lines share one sink, levels and quiet switch; the gateway's carry
// `gateway: `; tracers turn on by name from ENGINE_TRACE or GATEWAY_TRACE.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { gatewayLog, log, setLogFile, setQuiet, tracer } from '../../common/logger.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('logger', () => {
  const file = path.join(os.tmpdir(), `logger-test-${process.pid}.log`);
  afterEach(() => {
    setLogFile(undefined);
    setQuiet(true);
    fs.rmSync(file, { force: true });
  });

  it("engine and gateway lines go to the same sink, Triton-style, the gateway's marked", () => {
    setLogFile(file);
    setQuiet(false);
    log.info('engine says hi');
    gatewayLog.warn('gateway warns');
    gatewayLog.error('gateway failed', new Error('boom'));
    setQuiet(true);
    log.info('not written');
    gatewayLog.info('not written either');
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines[0]).toMatch(/^I\d{4}-\d\d-\d\dT[\d:.]+Z engine says hi$/);
    expect(lines[1]).toMatch(/^W\S+ gateway: gateway warns$/);
    expect(lines[2]).toMatch(/^E\S+ gateway: gateway failed \(Error: boom/);
    expect(fs.readFileSync(file, 'utf8')).not.toContain('not written');
  });

  it("tracers turn on by name from either process's variable", () => {
    const out = execFileSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        "import { tracer } from './common/logger.ts'; console.log(['batcher', 'leases', 'shm'].map((n) => tracer(n).enabled).join(','));",
      ],
      { cwd: ROOT, env: { ...process.env, ENGINE_TRACE: 'batcher', GATEWAY_TRACE: 'leases' }, encoding: 'utf8' },
    );
    expect(out.trim()).toBe('true,true,false');
    expect(tracer('nobody-turned-this-on').enabled).toBe(false);
  });
});
