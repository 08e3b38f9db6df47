// A Python model's stdout/stderr into the engine's log, bounded (issue 41): a
// model printing 8 MB in one call made 8,193 log lines. Lines are cut at
// MAX_LINE characters (a line still arriving past that is cut as it comes,
// so nothing unbounded is buffered), and at most LINES_PER_SECOND lines a
// second reach the log; what is dropped is counted and said once a second.
//
// Threading: the main thread's stream events; one limiter per stub stream.
import type { Readable } from 'node:stream';

export const MAX_LINE = 4096;
export const LINES_PER_SECOND = 100;

export interface OutputLimits {
  maxLine: number;
  linesPerSecond: number;
}

/** Feeds `stream`'s lines to `emit`, cut and rate-limited; `dropped` hears the counts of each second that dropped any. */
export function pipeBoundedLines(
  stream: Readable,
  emit: (line: string) => void,
  dropped: (lines: number, bytes: number) => void,
  limits: OutputLimits = { maxLine: MAX_LINE, linesPerSecond: LINES_PER_SECOND },
): void {
  let rest = '';
  let cutting = 0; // characters dropped from the line in progress (it was over maxLine)
  let windowStart = Date.now();
  let inWindow = 0;
  let droppedLines = 0;
  let droppedBytes = 0;
  let flushTimer: NodeJS.Timeout | undefined;
  const flushDrops = () => {
    if (flushTimer) clearTimeout(flushTimer);
    flushTimer = undefined;
    if (droppedLines) dropped(droppedLines, droppedBytes);
    droppedLines = 0;
    droppedBytes = 0;
  };
  const line = (text: string, cut: number) => {
    const now = Date.now();
    if (now - windowStart >= 1000) {
      windowStart = now;
      inWindow = 0;
      flushDrops();
    }
    if (inWindow >= limits.linesPerSecond) {
      droppedLines++;
      droppedBytes += text.length + cut;
      // Said at the end of this second even if the model prints nothing more.
      flushTimer ??= setTimeout(flushDrops, Math.max(0, windowStart + 1000 - now)).unref();
      return;
    }
    inWindow++;
    emit(cut ? `${text}… (${cut} more characters cut)` : text);
  };
  stream.setEncoding('utf8');
  stream.on('data', (s: string) => {
    let from = 0;
    for (let nl = s.indexOf('\n'); nl >= 0; from = nl + 1, nl = s.indexOf('\n', from)) {
      const piece = s.slice(from, nl);
      if (cutting) line(rest, cutting + piece.length);
      else if (rest.length + piece.length > limits.maxLine)
        line((rest + piece).slice(0, limits.maxLine), rest.length + piece.length - limits.maxLine);
      else line(rest + piece, 0);
      rest = '';
      cutting = 0;
    }
    const tail = s.slice(from);
    if (cutting) cutting += tail.length;
    else if (rest.length + tail.length > limits.maxLine) {
      const whole = rest + tail;
      rest = whole.slice(0, limits.maxLine);
      cutting = whole.length - limits.maxLine;
    } else rest += tail;
  });
  stream.on('end', () => {
    if (rest || cutting) line(rest, cutting);
    flushDrops();
  });
}
