/**
 * The graph explorer: find an entity, see its neighbourhood drawn (neighbours of neighbours at depth 2, so an
 * entity named only beside a nearer one appears), select an edge and reach the memory behind it, find a path.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seeText, skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();
const NOTES = ["user", "alice", "notes"];

interface Related { memories: { key: string }[] }

describe("graph", { skip: skip ?? false }, () => {
  let world: World;
  let alice: string;
  withWorld(async (started) => {
    world = started;
    alice = await world.token({ sub: "alice" });
    await world.api(alice, "PUT", "/v1/memories", { namespace: NOTES, key: "n1", value: { text: "Alice works on Project A." } });
    await world.api(alice, "PUT", "/v1/memories", { namespace: NOTES, key: "n2", value: { text: "Project A caused the memory leak." } });
    await world.api(alice, "PUT", "/v1/memories", { namespace: NOTES, key: "n3", value: { text: "Bob Smith works on Project A." } });
    // The indexer derives the graph off the write path: wait until the three memories are in it.
    for (let attempt = 0; ; attempt += 1) {
      const related = await world.api<Related>(alice, "POST", "/v1/graph/related",
        { namespace_prefix: [], from: { entity: "Alice" }, max_hops: 3 });
      if (related.memories.length === 3) break;
      assert.ok(attempt < 600, "the graph was derived from the three memories");
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it("draws an entity's neighbourhood and names the memory behind an edge", async () => {
    const page = await world.page(alice);
    page.setDefaultTimeout(60_000);
    await page.goto(`${world.url}/console/#/graph`);
    // Only Alice is named: Bob Smith is reachable only through n3, a memory that also names the nearer Project A.
    await page.getByLabel("Entity names (comma separated)").fill("Alice");
    await page.getByRole("button", { name: "Find entities" }).click();
    await page.getByRole("button", { name: "Explore Alice" }).click();

    const graph = page.getByTestId("graph-svg");
    await graph.waitFor();
    const aliceNode = graph.getByRole("button", { name: "Alice (PERSON), the centre" });
    const project = graph.getByRole("button", { name: "Project A (PROJECT), 1 relation away" });
    await aliceNode.waitFor();
    await project.waitFor();
    assert.equal(await aliceNode.getAttribute("tabindex"), "0", "entities are focusable");
    const edge = graph.getByRole("button", { name: "Alice WORKS_ON Project A" });
    assert.equal(await edge.locator("text").textContent(), "WORKS_ON", "the edge is labelled by its relation");
    await graph.getByRole("button", { name: "Bob Smith (PERSON), 2 relations away" }).waitFor();
    await graph.getByRole("button", { name: "memory leak (CONCEPT), 2 relations away" }).waitFor();
    assert.equal(await graph.locator(".c2-edge").count(), 3);
    assert.deepEqual(await page.getByTestId("graph-edges").locator("tbody tr").evaluateAll((rows) =>
      rows.map((row) => Array.from(row.querySelectorAll("td")).slice(0, 3).map((td) => td.textContent).join(" ")).sort()),
    ["Alice WORKS_ON Project A", "Bob Smith WORKS_ON Project A", "memory leak CAUSED_BY Project A"], "the table lists the same edges");
    await world.screenshot(page, "graph");

    await edge.focus();
    await page.keyboard.press("Enter");
    const detail = page.getByTestId("graph-detail");
    await detail.getByRole("heading", { name: "Alice WORKS_ON Project A" }).waitFor();
    const link = detail.getByRole("link", { name: "user / alice / notes : n1" });
    const href = await link.getAttribute("href") ?? "";
    const params = new URLSearchParams(href.replace(/^#\/memory\?/, ""));
    assert.ok(href.startsWith("#/memory?"), href);
    assert.deepEqual(JSON.parse(params.get("ns") ?? "null"), NOTES);
    assert.equal(params.get("key"), "n1");
    await world.screenshot(page, "graph-edge");

    await page.getByLabel("Path to").fill("memory leak");
    await page.getByRole("button", { name: "Find path" }).click();
    await seeText(page, "Path (2 relations): Alice —WORKS_ON→ Project A ←CAUSED_BY— memory leak");
    assert.equal(await graph.locator(".c2-edge.c2-on-path").count(), 2, "both edges of the path are highlighted");
    await graph.getByRole("button", { name: /^memory leak \(CONCEPT\)/ }).waitFor();
    await world.screenshot(page, "graph-path");

    await project.click();
    await graph.getByRole("button", { name: "Project A (PROJECT), the centre" }).waitFor();
    await detail.getByRole("link", { name: "user / alice / notes : n2" }).waitFor();
    await detail.getByRole("link", { name: "user / alice / notes : n3" }).waitFor();
    assert.deepEqual(await world.problems(page), []);
  });
});
