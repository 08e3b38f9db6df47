// The one status module: Triton's HttpCodeFromError mapping and the wording
// of a failed explicit load.
import { describe, expect, it } from 'vitest';
import { StatusError, failedLoad, httpStatusOf, invalidArg, type StatusCode } from '../../engine/api/status.ts';

describe('httpStatusOf', () => {
  it("maps every code as Triton's HttpCodeFromError does", () => {
    const want: Record<StatusCode, number> = {
      INTERNAL: 500,
      NOT_FOUND: 404,
      UNAVAILABLE: 503,
      UNSUPPORTED: 501,
      UNKNOWN: 400,
      INVALID_ARG: 400,
      ALREADY_EXISTS: 400,
      CANCELLED: 400,
    };
    for (const [code, status] of Object.entries(want)) expect(httpStatusOf(code as StatusCode), code).toBe(status);
  });
});

describe('failedLoad', () => {
  it("prefixes failed to load '<model>' and keeps the code and our reason", () => {
    const e = failedLoad('m', invalidArg('m/config.pbtxt: instance_group[0].count: must be at least 1'));
    expect([e.code, e.message]).toEqual(['INVALID_ARG', "failed to load 'm': m/config.pbtxt: instance_group[0].count: must be at least 1"]);
  });
  it('does not prefix twice', () => {
    const e = failedLoad('m', invalidArg("failed to load 'm', failed to poll from model repository"));
    expect(e.message).toBe("failed to load 'm', failed to poll from model repository");
  });
  it('words a plain Error by its message', () => {
    const e = failedLoad('m', new Error('boom'));
    expect(e).toBeInstanceOf(StatusError);
    expect([e.code, e.message]).toEqual(['INTERNAL', "failed to load 'm': boom"]);
  });
});
