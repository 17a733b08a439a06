/** The admin views: the policy editor's errors, settings' ranges, index status, the integrity scan, metrics; and a plain user kept out. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Page } from "playwright-core";
import { seeText, skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();

interface Bundle { version: string; policies: Record<string, string> }

describe("admin views", { skip: skip ?? false }, () => {
  let world: World;
  let admin: string;
  let alice: string;
  const open = async (token: string, view: string): Promise<Page> => {
    const page = await world.page(token);
    page.setDefaultTimeout(60_000);
    await page.goto(`${world.url}/console/#/${view}`);
    await page.getByTestId("who").waitFor();
    return page;
  };
  withWorld(async (started) => {
    world = started;
    admin = await world.token({ sub: "ops", roles: ["admin"] });
    alice = await world.token({ sub: "alice" });
  });

  it("refuses a broken policy, naming its file, line and column, with the caret on that line; nothing stored", async () => {
    const before = await world.api<Bundle>(admin, "GET", "/admin/v1/memories/policies");
    const page = await open(admin, "admin/policies");
    const editor = page.locator('textarea[data-file="authz.rego"]');
    await editor.waitFor();
    assert.equal(await editor.inputValue(), before.policies["authz.rego"]);
    await world.screenshot(page, "admin-policies");
    const lines = before.policies["authz.rego"].split("\n");
    lines[3] = "this is not rego {";
    await editor.fill(lines.join("\n"));

    await page.getByRole("button", { name: "Upload" }).click();
    const where = page.getByTestId("policy-error-where");
    await where.waitFor();
    assert.equal(await where.textContent(), "authz.rego, line 4, column 1");
    await seeText(page, "INVALID_ARGUMENT: ");
    const caret = await editor.evaluate((el: HTMLTextAreaElement) => ({
      focused: document.activeElement === el,
      line: el.value.slice(0, el.selectionStart).split("\n").length,
      collapsed: el.selectionStart === el.selectionEnd,
    }));
    assert.deepEqual(caret, { focused: true, line: 4, collapsed: true });
    assert.equal(await page.locator('[data-file="authz.rego"] .c2-error-line').textContent(), "4", "the gutter marks line 4");
    await seeText(page, "authz.rego: line 4, column 1");
    await world.screenshot(page, "admin-policies-error");

    await page.getByRole("button", { name: "Validate" }).click();
    await where.waitFor();
    const after = await world.api<Bundle>(admin, "GET", "/admin/v1/memories/policies");
    assert.deepEqual(after, before, "the stored bundle did not change");
    assert.deepEqual(await world.problems(page), []);
  });

  it("refuses to upload over a bundle another admin changed since the page loaded; theirs stays", async () => {
    const before = await world.api<Bundle>(admin, "GET", "/admin/v1/memories/policies");
    const page = await open(admin, "admin/policies");
    const editor = page.locator('textarea[data-file="authz.rego"]');
    await editor.waitFor();
    const theirs = { ...before.policies, "authz.rego": before.policies["authz.rego"] + "\n# theirs\n" };
    const landed = await world.api<Bundle>(admin, "PUT", "/admin/v1/memories/policies", { policies: theirs });

    await editor.fill(before.policies["authz.rego"] + "\n# mine\n");
    await page.getByRole("button", { name: "Upload" }).click();
    await seeText(page, "PRECONDITION_FAILED: ");
    assert.deepEqual(await world.api<Bundle>(admin, "GET", "/admin/v1/memories/policies"), landed, "theirs is in force");
    assert.equal(await page.getByText(`Version in force: ${before.version}`).count(), 1, "the page still shows what it loaded");

    await world.api<Bundle>(admin, "PUT", "/admin/v1/memories/policies", { policies: before.policies });
    assert.deepEqual(await world.problems(page), []);
  });

  it("shows a setting's range, refuses a value outside it before sending, and shows the service's 400", async () => {
    const page = await open(admin, "admin/settings");
    const depth = page.getByLabel("max_depth", { exact: true });
    await depth.waitFor();
    assert.equal(await depth.inputValue(), "10");
    await seeText(page, "A whole number, 1 to 32. Most segments a new namespace may have.");
    await world.screenshot(page, "admin-settings");
    await depth.fill("99");
    await seeText(page, "Out of range: A whole number, 1 to 32.");
    assert.equal(await depth.getAttribute("aria-invalid"), "true");
    await page.getByRole("button", { name: "Save changes" }).click();
    await seeText(page, "Not sent: 1 value is out of range (marked above).");
    await world.screenshot(page, "admin-settings-invalid");

    await depth.fill("12");
    // Each in its range, but the check may not exceed the auto-update threshold: only the service knows that rule.
    const auto = page.getByLabel("semantic_auto_update", { exact: true });
    const checkLow = page.getByLabel("semantic_check_low", { exact: true });
    const autoBefore = await auto.inputValue();
    const checkLowBefore = await checkLow.inputValue();
    await auto.fill("0.5");
    await checkLow.fill("0.9");
    await page.getByRole("button", { name: "Save changes" }).click();
    const refusal = page.getByTestId("settings-result").getByText(/^INVALID_ARGUMENT: /);
    await refusal.waitFor();
    assert.match(await refusal.textContent() ?? "", /semantic_check_low/);
    const settings = await world.api<Record<string, unknown>>(admin, "GET", "/admin/v1/memories/settings");
    assert.equal(settings.max_depth, 10, "a refused change stores nothing");

    await auto.fill(autoBefore);
    await checkLow.fill(checkLowBefore);
    await page.getByRole("button", { name: "Save changes" }).click();
    await seeText(page, "Saved: max_depth.");
    assert.equal((await world.api<Record<string, unknown>>(admin, "GET", "/admin/v1/memories/settings")).max_depth, 12);
    assert.deepEqual(await world.problems(page), []);
  });

  it("shows the index status, runs the indexer, and runs the integrity scan", async () => {
    await world.api(alice, "PUT", "/v1/memories", { namespace: ["user", "alice", "notes"], key: "k", value: { text: "Alice works on Project A." } });
    const page = await open(admin, "admin/index");
    const status = page.getByTestId("index-status");
    await status.getByRole("row", { name: /^Embedding model/ }).waitFor();
    await status.getByText("None: nothing is set aside.").waitFor();
    await page.getByRole("button", { name: "Run the indexer now" }).click();
    await page.getByTestId("index-result").getByText(/^Indexer run: \d+ processed, \d+ pending, 0 set aside\.$/).waitFor();
    await world.screenshot(page, "admin-index");

    // A quarantined version cannot be made on purpose here: the status answer is given one, and the
    // real retry route answers for its id.
    const poisoned = "0b0e5a1c-1111-4222-8333-944455556666";
    await page.route("**/admin/v1/memories/index/status", async (route) => {
      const response = await route.fetch();
      const body = await response.json();
      body.quarantined = 1;
      body.quarantined_items = [{ id: poisoned, namespace: ["user", "alice", "notes"], key: "big", version: 1,
        reason: "over its indexing budget", quarantined_at: "2026-01-01T00:00:00Z" }];
      await route.fulfill({ response, json: body });
    });
    await page.getByRole("button", { name: "Refresh" }).click();
    await status.getByRole("button", { name: "Retry big" }).click();
    await page.getByTestId("index-result").getByText(`Queued again: 0. Not retried: ${poisoned} (NOT_FOUND).`).waitFor();
    // Waits for a status answer still in the handler (the view refreshes after a retry): unrouted
    // under it, that handler's fulfill would fail after the test ("Route is already handled!").
    await page.unrouteAll({ behavior: "wait" });

    await page.goto(`${world.url}/console/#/admin/integrity`);
    await page.getByRole("button", { name: "Run the integrity scan" }).click();
    const result = page.getByTestId("integrity-result");
    await result.getByRole("table", { name: "Removed by the scan" }).waitFor();
    assert.deepEqual((await result.locator("tbody td:first-child").allTextContents()).sort(), ["edges", "memories", "mentions", "nodes"]);
    await world.screenshot(page, "admin-integrity");
    assert.deepEqual(await world.problems(page), []);
  });

  it("charts request rates and latency from /metrics after a few API calls", async () => {
    const page = await open(admin, "admin/metrics");
    const requests = page.locator('[data-chart^="Requests per second"]');
    await requests.locator("polyline").first().waitFor({ state: "attached" });
    // Calls made after the view's first scrapes show as a rate above zero in a later one.
    for (let i = 0; i < 5; i += 1) await world.api(alice, "GET", "/v1/memories?ns=user&ns=alice&ns=notes&key=k");
    await page.waitForFunction(() => Array.from(document.querySelectorAll('[data-chart^="Requests per second"] polyline[data-series="GET /v1/memories"]'))
      .some((line) => (line.getAttribute("points") ?? "").split(" ").some((point) => Number(point.split(",")[1]) < 150)), undefined, { timeout: 60_000 });
    await page.locator('[data-chart^="Latency"] polyline[data-series="p95"]').waitFor({ state: "attached" });
    assert.match(await requests.locator("svg").getAttribute("aria-label") ?? "", /GET \/v1\/memories \d/);
    await world.screenshot(page, "admin-metrics");
    assert.deepEqual(await world.problems(page), []);
  });

  it("says where the metrics are when the deployment has no /metrics (AWS)", async () => {
    const page = await world.page(admin);
    page.setDefaultTimeout(60_000);
    await page.route("**/metrics", (route) => route.fulfill({ status: 404,
      json: { error: { code: "NOT_FOUND", message: "no such route", retryable: false, details: {} } } }));
    await page.goto(`${world.url}/console/#/admin/metrics`);
    await seeText(page, "on AWS the metrics are in CloudWatch");
    assert.equal(await page.locator("[data-chart]").count(), 0);
  });

  it("keeps scraping after a failed scrape, and charts once the service answers again", async () => {
    const page = await world.page(admin);
    page.setDefaultTimeout(60_000);
    let failed = false;
    await page.route((url) => url.pathname === "/metrics", (route) => {
      if (failed) return route.fallback();
      failed = true;
      return route.abort("connectionrefused");
    });
    await page.goto(`${world.url}/console/#/admin/metrics`);
    await seeText(page, "The service did not answer.");
    await page.locator('[data-chart^="Requests per second"]').waitFor();
    assert.equal(await page.getByText("The service did not answer.").count(), 0, "the error gives way to the charts' status");
  });

  it("keeps a plain user out of the admin views", async () => {
    const page = await open(alice, "admin/settings");
    await seeText(page, "This view is for admins.");
    assert.equal(await page.locator('nav a[href^="#/admin"]').count(), 0, "no admin entries in the menu");
    assert.equal(await page.getByLabel("max_depth", { exact: true }).count(), 0);
    await world.screenshot(page, "admin-refused");
  });
});
