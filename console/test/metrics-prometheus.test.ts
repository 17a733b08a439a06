import assert from "node:assert/strict";
import { test } from "node:test";
import { MAX_SAMPLES, bucketIncrease, histogramBuckets, parsePrometheus, quantile, rates, sumBy } from "../src/views/metrics-prometheus.js";

const SCRAPE = `# HELP memory_operations_total Memory operations answered
# TYPE memory_operations_total counter
memory_operations_total{operation="put",status="200",tenant="default"} 3.0
memory_operations_total{operation="put",status="400",tenant="default"} 1.0
memory_operations_total{operation="search",status="200",tenant="t\\"x"} 2.0
memory_operations_latency_bucket{le="1.0",operation="put",tenant="default"} 1.0
memory_operations_latency_bucket{le="10.0",operation="put",tenant="default"} 3.0
memory_operations_latency_bucket{le="+Inf",operation="put",tenant="default"} 4.0
memory_operations_latency_bucket{le="1.0",operation="search",tenant="default"} 0.0
memory_operations_latency_bucket{le="10.0",operation="search",tenant="default"} 2.0
memory_operations_latency_bucket{le="+Inf",operation="search",tenant="default"} 2.0
process_up 1 1712345678000
broken{le="1" 5
`;

test("samples with labels, escapes and timestamps; comments and malformed lines skipped", () => {
  const samples = parsePrometheus(SCRAPE);
  assert.equal(samples.length, 10);
  assert.deepEqual(samples[2], { name: "memory_operations_total", labels: { operation: "search", status: "200", tenant: 't"x' }, value: 2 });
  assert.deepEqual(samples[9], { name: "process_up", labels: {}, value: 1 });
  assert.equal(samples[5].labels.le, "+Inf");
});

test("sums by a label and bucket bounds over the other labels", () => {
  const samples = parsePrometheus(SCRAPE);
  assert.deepEqual(Object.fromEntries(sumBy(samples, "memory_operations_total", "operation")), { put: 4, search: 2 });
  assert.deepEqual([...histogramBuckets(samples, "memory_operations_latency")], [[1, 1], [10, 5], [Infinity, 6]]);
});

test("rates per second, a counter reset counting from zero", () => {
  const before = new Map([["put", 10], ["get", 50]]);
  const after = new Map([["put", 16], ["get", 4], ["new", 2]]);
  assert.deepEqual(Object.fromEntries(rates(before, after, 2)), { put: 3, get: 2, new: 1 });
  assert.equal(rates(before, after, 0).size, 0);
});

test("quantiles interpolate inside the bucket, as histogram_quantile does", () => {
  const cumulative = new Map([[10, 50], [20, 90], [Infinity, 100]]);
  assert.equal(quantile(0.5, cumulative), 10);
  assert.equal(quantile(0.7, cumulative), 15);
  assert.equal(quantile(0.95, cumulative), 20, "in +Inf: the highest finite bound");
  assert.equal(quantile(0.5, new Map([[10, 0], [Infinity, 0]])), null);
  assert.equal(quantile(0.5, new Map()), null);
});

test("a window's quantile comes from the buckets' increase", () => {
  const before = new Map([[1, 5], [10, 5], [Infinity, 5]]);
  const after = new Map([[1, 5], [10, 9], [Infinity, 9]]);
  const recent = bucketIncrease(before, after);
  assert.deepEqual([...recent], [[1, 0], [10, 4], [Infinity, 4]]);
  assert.equal(quantile(0.5, recent), 5.5);
});

test("a huge scrape is cut at MAX_SAMPLES", () => {
  const text = "m 1\n".repeat(MAX_SAMPLES + 10);
  assert.equal(parsePrometheus(text).length, MAX_SAMPLES);
});
