import { ApiError } from "../api.js";
import type { View } from "../context.js";
import { h, notice, replace } from "../dom.js";
import { errorNotice } from "./c2-ui.js";
import { lineChart, type Series } from "./metrics-chart.js";
import { bucketIncrease, histogramBuckets, parsePrometheus, quantile, rates, sumBy, type Sample } from "./metrics-prometheus.js";

/** Seconds between scrapes while the view is open. */
const POLL_SECONDS = 2;
/** Points kept per series: two minutes at the poll interval. */
const HISTORY = 60;

/** What one scrape leaves for the next: the counters the rates are taken from. */
interface Totals {
  at: number;
  requests: Map<string, number>;
  errors: Map<string, number>;
  latency: Map<number, number>;
}

/**
 * Bounded series: every name keeps HISTORY values aligned with the others. A series seen for the
 * first time starts with `before` at the earlier points: 0 for a rate (the counter did not exist,
 * nothing happened), null for a quantile (nothing to measure).
 */
class History {
  points = 0;
  private readonly series = new Map<string, (number | null)[]>();

  constructor(private readonly before: 0 | null) {}

  push(values: Map<string, number | null>): void {
    for (const name of values.keys()) if (!this.series.has(name)) this.series.set(name, new Array<number | null>(this.points).fill(this.before));
    for (const [name, list] of this.series) {
      list.push(values.get(name) ?? null);
      if (list.length > HISTORY) list.shift();
    }
    this.points = Math.min(this.points + 1, HISTORY);
  }

  all(): Series[] {
    return [...this.series].map(([name, values]) => ({ name, values }));
  }
}

export const adminMetricsView: View = {
  path: "admin/metrics",
  title: "Metrics",
  inMenu: true,
  admin: true,
  render(root, ctx) {
    const charts = h("div", { "data-testid": "metrics-charts" });
    const status = h("div", { "aria-live": "polite" });
    const requests = new History(0);
    const errors = new History(0);
    const latency = new History(null);
    let previous: Totals | null = null;
    let stopped = false;

    const scrape = async (): Promise<void> => {
      let samples: Sample[];
      try {
        samples = parsePrometheus(await ctx.api.text("/metrics"));
      } catch (error) {
        // No /metrics at all is final; any other failure may pass, so the next scrape tries again.
        if (error instanceof ApiError && error.status === 404) {
          stopped = true;
          replace(status, notice("This deployment has no /metrics to scrape: on AWS the metrics are in CloudWatch (namespace memsvc, EMF from the API function) and its dashboard."));
        } else {
          replace(status, errorNotice(error));
        }
        return;
      }
      const totals: Totals = {
        at: performance.now() / 1000,
        requests: sumBy(samples, "memory_operations_total", "operation"),
        errors: sumBy(samples, "memory_operations_errors_total", "code"),
        latency: histogramBuckets(samples, "memory_operations_latency"),
      };
      if (previous) {
        const seconds = totals.at - previous.at;
        requests.push(rates(previous.requests, totals.requests, seconds));
        errors.push(rates(previous.errors, totals.errors, seconds));
        const recent = bucketIncrease(previous.latency, totals.latency);
        latency.push(new Map([["p50", quantile(0.5, recent)], ["p95", quantile(0.95, recent)]]));
        replace(charts,
          lineChart("Requests per second, by operation", "requests/s", requests.points, requests.all()),
          lineChart("Latency, all operations (estimated from the histogram's buckets)", "ms", latency.points, latency.all()),
          lineChart("Errors per second, by code", "errors/s", errors.points, errors.all()));
        replace(status, notice(`Updated every ${POLL_SECONDS} s; the last ${HISTORY} points are kept.`));
      } else {
        replace(status, notice("First scrape taken: rates appear with the next one."));
      }
      previous = totals;
    };

    root.append(h("p", {}, "What GET /metrics exports (Prometheus text), read while this view is open."), status, charts);
    let timer: number | undefined;
    const loop = async (): Promise<void> => {
      await scrape();
      if (!stopped) timer = window.setTimeout(() => void loop(), POLL_SECONDS * 1000);
    };
    void loop();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
    };
  },
};
