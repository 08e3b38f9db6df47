// One server-sent event's text (common/sse.ts), as the engine's generate_stream
// and the gateway's stream route write it.
import { describe, expect, it } from 'vitest';
import { sseEvent } from '../../common/sse.ts';

describe('sseEvent', () => {
  it('writes the value as JSON on one data line, a newline inside escaped', () => {
    expect(sseEvent({ a: 'b\nc' })).toBe('data: {"a":"b\\nc"}\n\n');
  });
  it('names the event when given one', () => {
    expect(sseEvent({ responses: 3 }, 'end')).toBe('event: end\ndata: {"responses":3}\n\n');
    expect(sseEvent({ code: 'X' }, 'error')).toBe('event: error\ndata: {"code":"X"}\n\n');
  });
});
