/** The search and recall playground: scores broken down, recall's explain parts and what it left out, a bad filter refused. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seeText, skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();
const LEFT_OUT_WORDS = [
  "its relevance is below the minimum score",
  "it matches the query too weakly (below the tenant's recall_min_match)",
  "it ranked past the limit",
  "it did not fit in the token budget",
  "it repeats a memory already returned",
];

describe("search and recall", { skip: skip ?? false }, () => {
  let world: World;
  let alice: string;
  withWorld(async (started) => {
    world = started;
    alice = await world.token({ sub: "alice" });
    for (const content of ["I live in Berlin", "I prefer window seats on long flights"]) {
      await world.api(alice, "POST", "/v1/memories/remember", { content });
    }
    await world.api(alice, "PUT", "/v1/memories", {
      namespace: ["user", "alice", "notes"], key: "py_tip", value: { text: "Python uses indentation for blocks" }, sync_index: true,
    });
  });

  it("recalls with every score part explained, and says in words why a candidate was left out", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/search`);
    await page.getByLabel("Query").fill("where do I live");
    await page.getByLabel("Limit").fill("1");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const recalled = page.getByRole("table", { name: "Recalled memories and how each was scored" });
    await recalled.waitFor({ timeout: 30_000 });
    const headers = await recalled.locator("th").allTextContents();
    for (const part of ["Relevance", "Keyword (BM25)", "Semantic (cosine)", "Fused", "Match", "Importance", "Recency", "Pinned"]) {
      assert.ok(headers.includes(part), `${part} in ${headers}`);
    }
    const cells = await recalled.locator("tbody tr").first().locator("td").allTextContents();
    assert.equal(cells.length, headers.length);
    assert.equal(cells[1], "I live in Berlin");
    for (const index of [4, 5, 6, 7, 8, 9, 10]) assert.match(cells[index], /^\d+\.\d{3}$/, `${headers[index]}: ${cells[index]}`);
    assert.equal(cells[11], "0", "not pinned");
    await seeText(page, "0.55 × match + 0.2 × importance");

    const leftOut = page.getByRole("table", { name: "Candidates left out and why" });
    const reasons = await leftOut.locator("tbody tr td:last-child").allTextContents();
    assert.ok(reasons.length >= 1, "the flights and Python memories were candidates");
    for (const reason of reasons) assert.ok(LEFT_OUT_WORDS.includes(reason), `a reason in words: ${reason}`);
    await world.screenshot(page, "recall");
    assert.deepEqual(await world.problems(page), []);
  });

  it("searches in each mode and shows score, cosine and keyword score", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/search`);
    await page.getByLabel("Run").selectOption("search");
    await page.getByLabel("Query").fill("indentation");
    const results = page.getByRole("table", { name: "Search results" });
    for (const mode of ["hybrid", "semantic", "keyword"]) {
      await page.getByLabel("Mode").selectOption(mode);
      await page.getByRole("button", { name: "Run", exact: true }).click();
      await results.waitFor({ timeout: 30_000 });
      const first = await results.locator("tbody tr").first().locator("td").allTextContents();
      assert.equal(first[1], "py_tip", `${mode}: ${first}`);
      assert.match(first[4], /^\d\.\d{3}$/, `${mode} score`);
      if (mode === "keyword") assert.equal(first[5], "—", "keyword mode has no cosine");
      if (mode === "semantic") assert.match(first[5], /^0\.\d{3}$/, "a cosine");
      await world.screenshot(page, `search-${mode}`);
    }
    assert.deepEqual(await world.problems(page), []);
  });

  it("refuses a filter that is not JSON before sending it, and shows the API's own refusal", async () => {
    const page = await world.page(alice);
    const sent: string[] = [];
    page.on("request", (request) => { if (request.url().includes("/v1/memories/")) sent.push(request.url()); });
    await page.goto(`${world.url}/console/#/search`);
    await page.getByLabel("Query").fill("where do I live");
    await page.getByLabel("Filter (JSON)").fill("{type: fact}");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    await seeText(page, "The filter is not valid JSON.");
    assert.deepEqual(sent, [], "nothing was sent");

    await page.getByLabel("Filter (JSON)").fill("");
    await page.getByLabel("Namespace prefix").fill("user/bob");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const alert = page.getByRole("alert");
    await alert.waitFor({ timeout: 30_000 });
    assert.match(await alert.textContent() ?? "", /^FORBIDDEN: /);
  });
});
