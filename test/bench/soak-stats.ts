// Pure helpers of the soak report: least-squares slope per minute over the
// samples after warm-up.

export interface Sample {
  /** ms since epoch */
  t: number;
  value: number;
}

/** Least-squares slope of value over time, in value units per minute (0 with fewer than 2 samples). */
export function slopePerMinute(samples: readonly Sample[]): number {
  const n = samples.length;
  if (n < 2) return 0;
  const t0 = samples[0]!.t;
  let sx = 0;
  let sy = 0;
  for (const s of samples) {
    sx += (s.t - t0) / 60_000;
    sy += s.value;
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (const s of samples) {
    const x = (s.t - t0) / 60_000 - mx;
    num += x * (s.value - my);
    den += x * x;
  }
  return den === 0 ? 0 : num / den;
}

/** Samples taken at or after `from` (the end of warm-up). */
export function afterWarmup(samples: readonly Sample[], from: number): Sample[] {
  return samples.filter((s) => s.t >= from);
}
