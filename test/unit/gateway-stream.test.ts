// The streaming reply forms (gateway/http/stream-routes.ts): which form an Accept
// header picks, and how a response or an error is framed in each.
import { describe, expect, it } from 'vitest';
import { encodeItem, streamMode } from '../../gateway/http/stream-routes.ts';
import { gatewayError } from '../../gateway/core/errors.ts';

describe('streamMode', () => {
  it('picks SSE, NDJSON or the collected array from Accept', () => {
    expect(streamMode('text/event-stream')).toBe('sse');
    expect(streamMode('text/event-stream, application/json;q=0.9')).toBe('sse');
    expect(streamMode('Application/X-NDJSON')).toBe('ndjson');
    expect(streamMode('application/json')).toBe('json');
    expect(streamMode('*/*')).toBe('json');
    expect(streamMode(undefined)).toBe('json');
  });
});

describe('encodeItem', () => {
  const err = gatewayError('STREAM_RESPONSE_ERROR', { name: 'f', reason: 'boom' });
  it('SSE: a data event per response, an error event for a failure', () => {
    expect(encodeItem('sse', { body: { a: 1 }, bytes: 1 })).toBe('data: {"a":1}\n\n');
    expect(encodeItem('sse', { error: err })).toBe(`event: error\ndata: ${JSON.stringify(err.toJSON())}\n\n`);
  });
  it('NDJSON: one line each', () => {
    expect(encodeItem('ndjson', { body: { a: 'x\ny' }, bytes: 1 })).toBe('{"a":"x\\ny"}\n');
    expect(encodeItem('ndjson', { error: err })).toBe(`${JSON.stringify(err.toJSON())}\n`);
    expect(JSON.parse(encodeItem('ndjson', { error: err })).error.code).toBe('STREAM_RESPONSE_ERROR');
  });
});
