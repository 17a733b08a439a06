/**
 * Stored markup stays text: a memory whose key and value hold an <img onerror> and a <script> is
 * shown as text on the list, its page, search results and the timeline; nothing runs, and the
 * page reports no CSP violation or error of its own.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Page } from "playwright-core";
import { skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();
const IMG = '<img src=x onerror="window.__xss=1">';
const SCRIPT = "<script>window.__xss=1</script>";
const NS = ["user", "alice", "xss"];
const KEY = `${IMG}${SCRIPT}`;
const VALUE = { text: `hostile ${IMG} ${SCRIPT}` };

describe("stored markup is shown as text", { skip: skip ?? false }, () => {
  let world: World;
  let alice: string;
  withWorld(async (started) => {
    world = started;
    alice = await world.token({ sub: "alice" });
    await world.api(alice, "PUT", "/v1/memories", { namespace: NS, key: KEY, value: VALUE, sync_index: true });
  });

  async function nothingRan(page: Page): Promise<void> {
    assert.equal(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss), undefined, "no injected code ran");
    assert.equal(await page.locator("main img, main script").count(), 0, "no element was made from stored text");
    assert.deepEqual(await world.problems(page), []);
  }

  it("on the memories list and the memory's page", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/memories?ns=${encodeURIComponent(JSON.stringify(NS))}`);
    const link = page.getByRole("link", { name: KEY, exact: true });
    await link.waitFor({ timeout: 30_000 });
    await page.getByText(JSON.stringify(VALUE), { exact: true }).waitFor({ timeout: 30_000 });
    await world.screenshot(page, "xss-list");
    await nothingRan(page);

    await link.click();
    await page.getByTestId("memory-value").waitFor({ timeout: 30_000 });
    assert.equal(await page.getByTestId("memory-key").textContent(), KEY);
    assert.deepEqual(JSON.parse(await page.getByTestId("memory-value").textContent() ?? ""), VALUE);
    await page.getByRole("table", { name: "Versions, newest first" }).waitFor({ timeout: 30_000 });
    await world.screenshot(page, "xss-memory");
    await nothingRan(page);
  });

  it("in search results", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/search`);
    await page.getByLabel("Run").selectOption("search");
    await page.getByLabel("Query").fill("hostile");
    await page.getByLabel("Mode").selectOption("keyword");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const results = page.getByRole("table", { name: "Search results" });
    await results.waitFor({ timeout: 30_000 });
    const cells = await results.locator("tbody tr").first().locator("td").allTextContents();
    assert.equal(cells[1], KEY);
    assert.equal(cells[3], JSON.stringify(VALUE));
    await world.screenshot(page, "xss-search");
    await nothingRan(page);
  });

  it("refuses to build a link off the console or a handler from text, whatever a view passes", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/identity`);
    await page.getByTestId("who").waitFor({ timeout: 30_000 });
    const results = await page.evaluate(async (module) => {
      const { h, svg } = await import(module);
      const attempts = [
        () => h("a", { href: "javascript:window.__xss=1" }, "x"),
        () => h("a", { href: "https://evil.example/" }, "x"),
        () => h("a", { HREF: " javascript:window.__xss=1" }, "x"),
        () => h("form", { action: "https://evil.example/" }),
        () => h("img", { src: "x" }),
        () => h("div", { onclick: "window.__xss=1" }),
        () => h("div", { ONMOUSEOVER: "window.__xss=1" }),
        () => svg("a", { href: "javascript:window.__xss=1" }),
        () => svg("a", { "xlink:href": "javascript:window.__xss=1" }),
        () => svg("g", { onclick: "window.__xss=1" }),
      ];
      const outcomes = attempts.map((make) => { try { make(); return "made"; } catch { return "refused"; } });
      return { outcomes, own: h("a", { href: "#/memory?key=k" }, "ok").getAttribute("href") };
    }, `${world.url}/console/js/dom.js`);
    assert.deepEqual(results.outcomes, new Array(10).fill("refused"));
    assert.equal(results.own, "#/memory?key=k", "the console's own routes are still links");
    await nothingRan(page);
  });

  it("on the timeline", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/timeline`);
    const row = page.getByRole("table", { name: "Events, newest first" }).locator("tbody tr").first();
    await row.waitFor({ timeout: 30_000 });
    const cells = await row.locator("td").allTextContents();
    assert.equal(cells[3], KEY);
    assert.equal(cells[5], JSON.stringify(VALUE));
    await world.screenshot(page, "xss-timeline");
    await nothingRan(page);
  });
});
