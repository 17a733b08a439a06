/** The timeline follows new events: a change made while the view is open shows up on top without a reload. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();
const NOTES = ["user", "alice", "notes"];

describe("timeline", { skip: skip ?? false }, () => {
  let world: World;
  let alice: string;
  withWorld(async (started) => {
    world = started;
    alice = await world.token({ sub: "alice" });
    await world.api(alice, "PUT", "/v1/memories", { namespace: NOTES, key: "first", value: { text: "already there" } });
  });

  it("shows a new event without a reload, newest first", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/timeline`);
    const rows = page.getByRole("table", { name: "Events, newest first" }).locator("tbody tr");
    await rows.filter({ hasText: "first" }).waitFor({ timeout: 30_000 });
    const loaded = page.url();

    await world.api(alice, "PUT", "/v1/memories", { namespace: NOTES, key: "arrived_later", value: { text: "written while watching" } });
    await rows.filter({ hasText: "arrived_later" }).waitFor({ timeout: 30_000 });
    const top = await rows.first().locator("td").allTextContents();
    assert.equal(top[1], "add");
    assert.equal(top[2], "user/alice/notes");
    assert.equal(top[3], "arrived_later");
    assert.equal(top[5], '{"text":"written while watching"}');
    assert.equal(await rows.count(), 2, "each event once");
    assert.equal(page.url(), loaded, "no reload, no navigation");
    await world.screenshot(page, "timeline");
    assert.deepEqual(await world.problems(page), []);
  });

  it("filters by kind and follows only those", async () => {
    const page = await world.page(alice);
    await page.goto(`${world.url}/console/#/timeline`);
    await page.getByLabel("delete").check();
    await page.getByRole("button", { name: "Follow" }).click();
    await page.getByText("No events yet.").waitFor({ timeout: 30_000 });
    await world.api(alice, "PUT", "/v1/memories", { namespace: NOTES, key: "unseen_add", value: { text: "an add" } });
    await world.api(alice, "DELETE", `/v1/memories?ns=user&ns=alice&ns=notes&key=first`);
    const rows = page.getByRole("table", { name: "Events, newest first" }).locator("tbody tr");
    await rows.filter({ hasText: "first" }).waitFor({ timeout: 30_000 });
    const kinds = await rows.locator("td:nth-child(2)").allTextContents();
    assert.deepEqual(kinds, ["delete"], "the add written before the delete is filtered out");
    assert.deepEqual(await world.problems(page), []);
  });
});
