/** Memories: the namespace tree with counts, a namespace's list, a memory's page with its history; and a phone-sized screen. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seeText, skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();
const NOTES = ["user", "alice", "notes"];
const TRIPS = ["user", "alice", "trips"];
const MANY = ["user", "alice", "many"];

describe("memories", { skip: skip ?? false }, () => {
  let world: World;
  let alice: string;
  withWorld(async (started) => {
    world = started;
    alice = await world.token({ sub: "alice" });
    const put = (namespace: string[], key: string, value: unknown, extra: object = {}) =>
      world.api(alice, "PUT", "/v1/memories", { namespace, key, value, ...extra });
    await put(NOTES, "py_tip", { text: "Python uses indentation" }, { ttl_seconds: 86_400 });
    await put(NOTES, "py_tip", { text: "Python uses indentation for blocks", stars: 5 }, { attributes: { source: "chat" } });
    await put(NOTES, "rust_tip", { text: "Rust has no garbage collector" });
    await put(TRIPS, "lisbon", { text: "Lisbon in May", city: "Lisbon" });
    for (let i = 1; i <= 12; i += 1) await put(MANY, `item_${String(i).padStart(2, "0")}`, { n: i });
  });

  it("browses from the tree to a memory, and reads its value and history", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/memories`);
    const tree = page.getByRole("navigation", { name: "Namespace tree" });
    const notes = tree.getByRole("link", { name: /^notes/ });
    await notes.waitFor({ timeout: 30_000 });
    assert.equal(await notes.locator(".badge").textContent(), "2", "notes holds two memories");
    assert.equal(await tree.getByRole("link", { name: /^trips/ }).locator(".badge").textContent(), "1");
    assert.equal(await tree.getByRole("link", { name: /^alice/ }).locator(".badge").textContent(), "15", "a parent sums its children");
    await world.screenshot(page, "memories-tree");

    await notes.click();
    const memories = page.getByRole("table", { name: "Memories" });
    await memories.waitFor({ timeout: 30_000 });
    assert.equal(await page.getByTestId("selected-namespace").textContent(), "user/alice/notes");
    assert.deepEqual((await memories.locator("tbody tr td:first-child").allTextContents()).sort(), ["py_tip", "rust_tip"]);
    await seeText(page, '{"text":"Python uses indentation for blocks","stars":5}');
    await world.screenshot(page, "memories-list");

    await page.getByRole("link", { name: "py_tip" }).click();
    await page.getByTestId("memory-value").waitFor({ timeout: 30_000 });
    assert.ok(page.url().includes("#/memory?"), page.url());
    assert.equal(await page.getByTestId("memory-key").textContent(), "py_tip");
    assert.deepEqual(JSON.parse(await page.getByTestId("memory-value").textContent() ?? ""),
      { text: "Python uses indentation for blocks", stars: 5 });
    await seeText(page, '"source": "chat"');
    await seeText(page, "never (no TTL)");
    const history = page.getByRole("table", { name: "Versions, newest first" });
    await history.waitFor({ timeout: 30_000 });
    const versions = await history.locator("tbody tr").allInnerTexts();
    assert.equal(versions.length, 2, versions.join("\n"));
    assert.match(versions[0], /^2\s+update/);
    assert.match(versions[1], /^1\s+add/);
    assert.match(versions[1], /Python uses indentation"/);
    assert.match(versions[1], /v2 \(update\)/, "the first version says what replaced it");
    await world.screenshot(page, "memory");
    assert.deepEqual(await world.problems(page), []);
  });

  it("shows a typed memory's type fields, valid time and provenance", async () => {
    const remembered = await world.api<{ memory: { namespace: string[]; key: string } }>(alice, "POST", "/v1/memories/remember",
      { content: "I live in Berlin", type: "fact", tags: ["home"], importance: 0.8, valid_from: "2020-01-01T00:00:00Z", source: "chat" });
    const page = await world.page(alice);
    const { namespace, key } = remembered.memory;
    await page.goto(`${world.url}/console/#/memory?${new URLSearchParams({ ns: JSON.stringify(namespace), key })}`);
    await page.getByTestId("memory-value").waitFor({ timeout: 30_000 });
    const facts = await page.locator("dl.facts").allInnerTexts();
    const text = facts.join("\n");
    assert.match(text, /type\s+fact/);
    assert.match(text, /importance\s+0\.8/);
    assert.match(text, /tags\s+\["home"\]/);
    assert.match(text, /Valid from\s+2020-01-01T00:00:00/);
    assert.match(text, /Valid to\s+open/);
    assert.match(text, /source\s+chat/);
    await world.screenshot(page, "memory-typed");
    assert.deepEqual(await world.problems(page), []);
  });

  it("filters a namespace's list and says when a filter is not JSON", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/memories?ns=${encodeURIComponent(JSON.stringify(NOTES))}`);
    const memories = page.getByRole("table", { name: "Memories" });
    await memories.waitFor({ timeout: 30_000 });
    await page.getByLabel("Filter (JSON)").fill("{stars: 5");
    await page.getByRole("button", { name: "Apply" }).click();
    await seeText(page, "The filter is not valid JSON.");
    await page.getByLabel("Filter (JSON)").fill('{"stars": {"gte": 5}}');
    await page.getByRole("button", { name: "Apply" }).click();
    await page.getByText("Memories 1–1, newest first.").waitFor({ timeout: 30_000 });
    assert.deepEqual(await memories.locator("tbody tr td:first-child").allTextContents(), ["py_tip"]);
    assert.deepEqual(await world.problems(page), []);
  });

  it("pages through a namespace's memories", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/memories?ns=${encodeURIComponent(JSON.stringify(MANY))}`);
    const keys = page.getByRole("table", { name: "Memories" }).locator("tbody tr td:first-child");
    await page.getByText("Memories 1–10, newest first.").waitFor({ timeout: 30_000 });
    assert.equal(await keys.first().textContent(), "item_12");
    assert.equal(await page.getByRole("button", { name: "Previous page" }).isDisabled(), true);
    await page.getByRole("button", { name: "Next page" }).click();
    await page.getByText("Memories 11–12, newest first.").waitFor({ timeout: 30_000 });
    assert.deepEqual(await keys.allTextContents(), ["item_02", "item_01"]);
    assert.equal(await page.getByRole("button", { name: "Next page" }).isDisabled(), true);
    await page.getByRole("button", { name: "Previous page" }).click();
    await page.getByText("Memories 1–10, newest first.").waitFor({ timeout: 30_000 });
    assert.deepEqual(await world.problems(page), []);
  });

  it("fits a phone: the memories view does not overflow the page sideways", async () => {
    const page = await world.page(alice, { viewport: { width: 390, height: 844 } });
    await page.goto(`${world.url}/console/#/memories?ns=${encodeURIComponent(JSON.stringify(NOTES))}`);
    await page.getByRole("table", { name: "Memories" }).waitFor({ timeout: 30_000 });
    const widths = await page.evaluate(() => ({ scroll: document.body.scrollWidth, client: document.documentElement.clientWidth }));
    assert.ok(widths.scroll <= widths.client, `body ${widths.scroll}px wide in a ${widths.client}px viewport`);
    await world.screenshot(page, "memories-phone");
  });
});
