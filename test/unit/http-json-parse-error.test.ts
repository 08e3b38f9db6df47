// rapidjson's parse errors as Triton's HTTP server reports them ("failed to
// parse the request JSON buffer: <message> at <byte offset>"): one case per
// rapidjson error kind the default parser raises (its GetParseError_En
// texts), offsets in bytes as rapidjson's Tell() gives them, and bounds:
// a million-element or deeply nested body is scanned without recursion.
import { describe, expect, it } from 'vitest';
import { rapidJsonError } from '../../engine/frontends/http/json-parse-error.ts';
import { parseJson } from '../../engine/frontends/http/infer-json.ts';

const err = (text: string) => rapidJsonError(Buffer.from(text));

describe('rapidJsonError', () => {
  it.each([
    ['', 'The document is empty.', 0],
    ['  \n', 'The document is empty.', 3],
    ['AAAA', 'Invalid value.', 0],
    ['nul', 'Invalid value.', 3],
    ['tru e', 'Invalid value.', 3],
    ['-', 'Invalid value.', 0],
    ['[1,]', 'Invalid value.', 3],
    ['{1:2}', 'Missing a name for object member.', 1],
    ['{"a":1, }', 'Missing a name for object member.', 8],
    ['{"a" 1}', 'Missing a colon after a name of object member.', 5],
    ['{"a":1 "b":2}', "Missing a comma or '}' after an object member.", 7],
    ['[1 2]', "Missing a comma or ']' after an array element.", 3],
    ['{} x', 'The document root must not be followed by other values.', 3],
    ['"abc', 'Missing a closing quotation mark in string.', 4],
    ['"a\\xb"', 'Invalid escape character in string.', 2],
    ['"\\u12G4"', 'Incorrect hex digit after \\u escape in string.', 1],
    ['"a\tb"', 'Invalid encoding in string.', 2],
    ['1.', 'Missing fraction part in number.', 2],
    ['1e+', 'Missing exponent in number.', 3],
    ['1e999', 'Number too big to be stored in double.', 0],
    ['{"é":x}', 'Invalid value.', 6], // offsets count UTF-8 bytes (é is two)
  ])('%j: %s at %d', (text, message, offset) => {
    expect(err(text)).toEqual({ message, offset });
  });

  it('answers undefined for valid JSON (it runs only after JSON.parse failed, and agrees with it)', () => {
    for (const t of ['{}', '[]', '0', '-0.5e-3', '"\\u00e9\\n"', '{"a":[1,{"b":null}],"c":true}', ' [ false ] '])
      expect(err(t)).toBeUndefined();
  });

  it('scans a million chunks of "A" and 100,000 levels of nesting without recursion', () => {
    expect(err('A'.repeat(1_000_000))).toEqual({ message: 'Invalid value.', offset: 0 });
    expect(err('['.repeat(100_000))).toEqual({ message: 'Invalid value.', offset: 100_000 });
    expect(err(`${'['.repeat(100_000)}1${']'.repeat(99_999)}`)).toEqual({
      message: "Missing a comma or ']' after an array element.",
      offset: 200_000,
    });
  });

  it("parseJson reports Triton's text (qa/L0_http/http_request_many_chunks.py)", () => {
    expect(() => parseJson(Buffer.from('A'.repeat(1000)), 'load request')).toThrow(
      'failed to parse the request JSON buffer: Invalid value. at 0',
    );
  });
});
