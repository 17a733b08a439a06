/**
 * Users and tenants are walled off in the console as in the API: bob sees none of alice's
 * namespaces, gets the API's refusal (not the value) on her memory's page, has no admin menu, and
 * is told an admin view is for admins; alice of another tenant sees nothing of the first.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seeText, signInAs, skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();
const SECRET = "alice's private travel plans";

describe("isolation", { skip: skip ?? false }, () => {
  let world: World;
  withWorld(async (started) => {
    world = started;
    const alice = await world.token({ sub: "alice" });
    const bob = await world.token({ sub: "bob" });
    await world.api(alice, "PUT", "/v1/memories", { namespace: ["user", "alice", "trips"], key: "plan", value: { text: SECRET } });
    await world.api(bob, "PUT", "/v1/memories", { namespace: ["user", "bob", "notes"], key: "todo", value: { text: "bob's own" } });
  });

  it("shows bob only his own namespaces and refuses alice's memory by URL", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "bob" });
    await page.goto(`${world.url}/console/#/memories`);
    const tree = page.getByRole("navigation", { name: "Namespace tree" });
    await tree.getByRole("link", { name: /^bob/ }).waitFor({ timeout: 30_000 });
    const text = await tree.innerText();
    assert.ok(!text.includes("alice") && !text.includes("trips"), `bob's tree: ${text}`);
    await world.screenshot(page, "isolation-tree");

    const aliceMemory = `#/memory?${new URLSearchParams({ ns: JSON.stringify(["user", "alice", "trips"]), key: "plan" })}`;
    await page.goto(`${world.url}/console/${aliceMemory}`);
    const alert = page.getByRole("alert").first();
    await alert.waitFor({ timeout: 30_000 });
    assert.match(await alert.textContent() ?? "", /^(FORBIDDEN|NOT_FOUND): /);
    await page.getByRole("heading", { name: "History" }).waitFor();
    await page.getByRole("alert").nth(1).waitFor({ timeout: 30_000 });
    assert.ok(!(await page.locator("body").innerText()).includes(SECRET), "the value is not shown");
    await world.screenshot(page, "isolation-memory");

    await page.goto(`${world.url}/console/#/memories?ns=${encodeURIComponent(JSON.stringify(["user", "alice"]))}`);
    const listError = page.locator(".list-box").getByRole("alert");
    await listError.waitFor({ timeout: 30_000 });
    assert.match(await listError.textContent() ?? "", /^FORBIDDEN: /);
    assert.ok(!(await page.locator("body").innerText()).includes(SECRET));
  });

  it("gives bob no admin menu, tells him an admin view is for admins, and the API refuses too", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "bob" });
    const paths = await page.locator("#app > nav a").evaluateAll((links) => links.map((a) => a.getAttribute("data-path") ?? ""));
    assert.deepEqual(paths.filter((p) => p.startsWith("admin/")), []);
    await page.goto(`${world.url}/console/#/admin/policies`);
    await seeText(page, "This view is for admins.");
    await world.screenshot(page, "isolation-admin");
    const status = await page.evaluate(async () => {
      const token = sessionStorage.getItem("memsvc.console.token");
      const response = await fetch("/admin/v1/memories/policies", { headers: { authorization: `Bearer ${token}` } });
      return response.status;
    });
    assert.equal(status, 403);
  });

  it("walls tenants off: alice of another tenant sees none of the first tenant's alice", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "alice", tenant: "other" });
    assert.equal(await page.getByTestId("who").textContent(), "alice @ other");
    await page.goto(`${world.url}/console/#/memories`);
    await seeText(page, "No namespaces here yet.");
    await page.goto(`${world.url}/console/#/timeline`);
    await seeText(page, "No events yet.");
    assert.equal(await page.getByRole("table", { name: "Events, newest first" }).locator("tbody tr").count(), 0);
    assert.deepEqual(await world.problems(page), []);
  });
});
