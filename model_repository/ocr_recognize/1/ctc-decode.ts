// Greedy CTC decoding as PaddleOCR's CTCLabelDecode does it: per time step
// take the most probable class, drop repeats of the previous step, drop the
// blank (class 0); the line's confidence is the mean probability of the
// characters kept. Classes: blank, then the character list, then space.
// Pure functions.

/** Class table from the character list file's text: blank, one class per line, space (use_space_char). */
export function characterClasses(dictText: string): string[] {
  const keys = dictText.split('\n').map((l) => l.replace(/\r$/, ''));
  if (keys.length && keys[keys.length - 1] === '') keys.pop();
  return ['', ...keys, ' '];
}

/** Decode one sequence of `steps` x `classes` probabilities starting at `offset`. */
export function ctcGreedy(probs: Float32Array, offset: number, steps: number, classes: string[]): { text: string; confidence: number } {
  const n = classes.length;
  let text = '';
  let sum = 0;
  let kept = 0;
  let prev = -1;
  for (let t = 0; t < steps; t++) {
    const base = offset + t * n;
    let best = 0;
    let bestP = probs[base]!;
    for (let c = 1; c < n; c++) {
      const p = probs[base + c]!;
      if (p > bestP) {
        bestP = p;
        best = c;
      }
    }
    if (best !== 0 && best !== prev) {
      text += classes[best];
      sum += bestP;
      kept++;
    }
    prev = best;
  }
  return { text, confidence: kept ? sum / kept : 0 };
}
