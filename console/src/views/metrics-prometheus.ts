/**
 * Reading what `GET /metrics` exports (Prometheus text format 0.0.4) and turning two scrapes into
 * rates and latency quantiles. Pure functions: no DOM, no fetch, so node --test covers them.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A scrape bigger than this is cut: the page stays responsive whatever the server sends. */
export const MAX_SAMPLES = 20000;

/**
 * `name{a="x",b="y"} 12.5 [timestamp]` lines into samples; comments, blank and malformed lines are
 * skipped. One pass over each line, so the work is linear in the text's size.
 */
export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split("\n")) {
    if (samples.length >= MAX_SAMPLES) break;
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const sample = parseLine(line);
    if (sample) samples.push(sample);
  }
  return samples;
}

function parseLine(line: string): Sample | null {
  let i = 0;
  while (i < line.length && /[A-Za-z0-9_:]/.test(line[i])) i += 1;
  const name = line.slice(0, i);
  if (!name || /^[0-9]/.test(name)) return null;
  const labels: Record<string, string> = {};
  if (line[i] === "{") {
    i += 1;
    for (;;) {
      while (line[i] === " " || line[i] === ",") i += 1;
      if (line[i] === "}") { i += 1; break; }
      const start = i;
      while (i < line.length && /[A-Za-z0-9_]/.test(line[i])) i += 1;
      const label = line.slice(start, i);
      if (!label || line[i] !== "=" || line[i + 1] !== '"') return null;
      i += 2;
      let value = "";
      for (; i < line.length && line[i] !== '"'; i += 1) {
        if (line[i] === "\\" && i + 1 < line.length) {
          i += 1;
          value += line[i] === "n" ? "\n" : line[i];
        } else {
          value += line[i];
        }
      }
      if (line[i] !== '"') return null;
      i += 1;
      labels[label] = value;
    }
  }
  const rest = line.slice(i).trim().split(/\s+/);
  const value = parseValue(rest[0] ?? "");
  return value === null ? null : { name, labels, value };
}

function parseValue(text: string): number | null {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return null;
  return Number(text);
}

/** The sum of `name`'s samples, grouped by the value of `label` ("" when a sample lacks it). */
export function sumBy(samples: Sample[], name: string, label: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const sample of samples) {
    if (sample.name !== name) continue;
    const group = sample.labels[label] ?? "";
    sums.set(group, (sums.get(group) ?? 0) + sample.value);
  }
  return sums;
}

/** Cumulative bucket counts of a histogram (`<name>_bucket`), summed over every other label, by upper bound. */
export function histogramBuckets(samples: Sample[], name: string): Map<number, number> {
  const buckets = new Map<number, number>();
  for (const sample of samples) {
    if (sample.name !== `${name}_bucket` || sample.labels.le === undefined) continue;
    const bound = parseValue(sample.labels.le);
    if (bound === null || Number.isNaN(bound)) continue;
    buckets.set(bound, (buckets.get(bound) ?? 0) + sample.value);
  }
  return buckets;
}

/** Per-second increase of each group between two scrapes; a counter that went down (a restart) counts from 0. */
export function rates(before: Map<string, number>, after: Map<string, number>, seconds: number): Map<string, number> {
  const result = new Map<string, number>();
  if (seconds <= 0) return result;
  for (const [group, value] of after) {
    const previous = before.get(group) ?? 0;
    const increase = value >= previous ? value - previous : value;
    result.set(group, increase / seconds);
  }
  return result;
}

/** Bucket-wise increase of a cumulative histogram between two scrapes. */
export function bucketIncrease(before: Map<number, number>, after: Map<number, number>): Map<number, number> {
  const result = new Map<number, number>();
  for (const [bound, value] of after) {
    const previous = before.get(bound) ?? 0;
    result.set(bound, value >= previous ? value - previous : value);
  }
  return result;
}

/**
 * The q-quantile estimated from cumulative buckets, as Prometheus' histogram_quantile does: linear
 * interpolation inside the bucket the rank falls in; the highest finite bound when it falls in +Inf.
 * Null when there are no observations.
 */
export function quantile(q: number, cumulative: Map<number, number>): number | null {
  const bounds = [...cumulative.keys()].sort((a, b) => a - b);
  if (!bounds.length) return null;
  const total = cumulative.get(bounds[bounds.length - 1]) ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const bound of bounds) {
    const count = cumulative.get(bound) ?? 0;
    if (count >= rank) {
      if (bound === Infinity) return lowerBound;
      const inBucket = count - lowerCount;
      if (inBucket <= 0) return bound;
      return lowerBound + (bound - lowerBound) * ((rank - lowerCount) / inBucket);
    }
    lowerBound = bound;
    lowerCount = count;
  }
  return lowerBound;
}
