/**
 * The TypeScript store's `get` p95 against the Python client's, on the same `memsvc serve`,
 * the same items, in the same run (issue 28's target: within 1.5x).
 *
 *   npm run bench [-- GETS KEYS ROUNDS WARMUP]   (default 2000 gets over 200 keys, 3 rounds, 4000 warm-up gets)
 *
 * Each round measures both clients (who goes first alternates), one sequential `get` after another (no
 * concurrency: latency, not throughput), after the same warm-up for each (a fresh Node process needs a few thousand calls before V8 has
 * optimised the hot path: with 1000, the first round's TypeScript p95 was 1.5-2.5x Python's).
 */

import { execFile } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { MemsvcStore } from "memsvc-client/store";
import { startServer } from "../test/server.js";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url)); // build-test/bench
const PYTHON = process.env.MEMSVC_PYTHON ?? resolve(here, "../../../../.venv/bin/python");
const PY_BENCH = resolve(here, "../../bench/get_p95.py");
const NS = ["bench", "items"];

interface Stats { n: number; p50_ms: number; p95_ms: number; p99_ms: number; mean_ms: number }

async function tsGets(store: MemsvcStore, gets: number, keys: number, warmup: number): Promise<Stats> {
  for (let i = 0; i < warmup; i += 1) await store.get(NS, `k${i % keys}`); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < gets; i += 1) {
    const start = performance.now();
    const item = await store.get(NS, `k${i % keys}`);
    samples.push(performance.now() - start);
    if (!item) throw new Error(`k${i % keys} is missing`);
  }
  samples.sort((a, b) => a - b);
  const pct = (p: number) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))];
  return { n: samples.length, p50_ms: pct(0.5), p95_ms: pct(0.95), p99_ms: pct(0.99), mean_ms: samples.reduce((a, b) => a + b, 0) / samples.length };
}

async function main(): Promise<void> {
  const [gets = 2000, keys = 200, rounds = 3, warmup = 4000] = process.argv.slice(2).map(Number);
  const server = await startServer();
  try {
    const token = await server.token({ sub: "bench", roles: ["admin"] });
    const store = new MemsvcStore({ url: server.url, token });
    for (let i = 0; i < keys; i += 50) {
      await store.batch(Array.from({ length: Math.min(50, keys - i) }, (_, j) => ({
        namespace: NS, key: `k${i + j}`, value: { text: `item ${i + j}: a short note to fetch back`, n: i + j },
      })));
    }
    const rows: Array<{ round: number; client: string } & Stats> = [];
    for (let round = 1; round <= rounds; round += 1) {
      // Alternate who goes first, so neither always meets the colder server.
      const order = round % 2 === 1 ? ["python", "typescript"] : ["typescript", "python"];
      for (const client of order) {
        if (client === "typescript") {
          rows.push({ round, client, ...(await tsGets(store, gets, keys, warmup)) });
        } else {
          const { stdout } = await run(PYTHON, [PY_BENCH, server.url, token, String(gets), String(keys), String(warmup)]);
          rows.push({ round, client, ...(JSON.parse(stdout) as Stats) });
        }
      }
    }
    const f = (x: number) => x.toFixed(2).padStart(7);
    console.log(`MemsvcStore.get latency, ${gets} sequential gets over ${keys} keys after ${warmup} warm-up gets, memsvc serve at ${server.url}`);
    console.log("round  client       p50 ms   p95 ms   p99 ms  mean ms");
    for (const r of rows) console.log(`${String(r.round).padStart(5)}  ${r.client.padEnd(10)} ${f(r.p50_ms)}  ${f(r.p95_ms)}  ${f(r.p99_ms)}  ${f(r.mean_ms)}`);
    for (let round = 1; round <= rounds; round += 1) {
      const [t, p] = ["typescript", "python"].map((c) => rows.find((r) => r.round === round && r.client === c)!.p95_ms);
      console.log(`round ${round}: p95 typescript/python = ${(t / p).toFixed(2)} (target <= 1.5)`);
    }
    const worst = (c: string) => Math.max(...rows.filter((r) => r.client === c).map((r) => r.p95_ms));
    console.log(`worst p95 over the rounds: typescript ${worst("typescript").toFixed(2)} ms, python ${worst("python").toFixed(2)} ms, ratio ${(worst("typescript") / worst("python")).toFixed(2)}`);
  } finally {
    await server.stop();
  }
}

await main();
