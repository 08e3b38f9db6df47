// Pure helpers of the soak report: least-squares slope per minute over the
// samples after warm-up, and over the last half of that window (a slope that
// falls from the whole window to its last half is memory levelling off).

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

/** The samples in the later half, by time, of a window (its midpoint sample included). */
export function lastHalf(samples: readonly Sample[]): Sample[] {
  if (samples.length < 2) return [...samples];
  const mid = (samples[0]!.t + samples[samples.length - 1]!.t) / 2;
  return samples.filter((s) => s.t >= mid);
}

/** One series after warm-up: first and last value, slope over the window and over its last half (MB, MB/min). */
export interface SeriesSummary {
  afterWarmup: number;
  end: number;
  slopePerMin: number;
  lastHalfSlopePerMin: number;
}

export function summarize(samples: readonly Sample[], warmEnd: number): SeriesSummary {
  const w = afterWarmup(samples, warmEnd);
  const r = (x: number, d: number) => Number(x.toFixed(d));
  return {
    afterWarmup: r(w[0]?.value ?? 0, 1),
    end: r(w[w.length - 1]?.value ?? 0, 1),
    slopePerMin: r(slopePerMinute(w), 3),
    lastHalfSlopePerMin: r(slopePerMinute(lastHalf(w)), 3),
  };
}
