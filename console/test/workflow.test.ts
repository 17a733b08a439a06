/** Sessions and workflow: a session's messages, a task context found by its sub-task, a plan with its working memory. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seeText, skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();

describe("sessions and workflow", { skip: skip ?? false }, () => {
  let world: World;
  let alice: string;
  withWorld(async (started) => {
    world = started;
    alice = await world.token({ sub: "alice", roles: ["service"] });
    await world.api(alice, "POST", "/v1/memory/sessions", { session_id: "trip-42", agent_id: "planner", title: "Lisbon" });
    await world.api(alice, "POST", "/v1/memory/sessions/trip-42/messages", { role: "user", content: "Book a hotel near Alfama for May 3-6" });
    await world.api(alice, "POST", "/v1/memory/sessions/trip-42/messages", { role: "assistant", content: "<b>Hotel Alfama</b> is free on those dates" });
    await world.api(alice, "POST", "/v1/memory/task-context", { task_id: "task-1", event_type: "research.requested",
      response_event: "research.completed", data: { query: "AI trends" }, sub_tasks: ["search-1", "search-2"] });
    await world.api(alice, "POST", "/v1/memory/plans", { plan_id: "plan-7", goal_event: "trip.booked", goal_data: { city: "Lisbon" } });
    await world.api(alice, "PUT", "/v1/memory/working/plan-7/hotel", { value: { name: "Alfama Inn", nights: 3 } });
  });

  it("lists sessions and shows one's messages in order, as text", async () => {
    const page = await world.page(alice);
    page.setDefaultTimeout(60_000);
    await page.goto(`${world.url}/console/#/sessions`);
    const link = page.getByTestId("sessions").getByRole("link", { name: "trip-42" });
    await link.waitFor();
    await world.screenshot(page, "sessions");
    await link.click();
    const messages = page.getByTestId("messages");
    await seeText(page, "Book a hotel near Alfama for May 3-6");
    const texts = await messages.locator(".c2-message-text").allTextContents();
    assert.deepEqual(texts, ["Book a hotel near Alfama for May 3-6", "<b>Hotel Alfama</b> is free on those dates"], "markup is shown as text");
    assert.equal(await messages.locator("b").count(), 0);
    await seeText(page, "Lisbon (trip-42)");
    await world.screenshot(page, "session");
    assert.deepEqual(await world.problems(page), []);
  });

  it("a double click on 'More messages' loads the next page once", async () => {
    await world.api(alice, "POST", "/v1/memory/sessions", { session_id: "long-1", title: "Long" });
    for (let i = 1; i <= 60; i += 1) {
      await world.api(alice, "POST", "/v1/memory/sessions/long-1/messages", { role: "user", content: `message ${i}` });
    }
    const page = await world.page(alice);
    page.setDefaultTimeout(60_000);
    const nextPages: string[] = [];
    page.on("request", (request) => {
      const url = new URL(request.url());
      if (url.pathname.endsWith("/long-1/messages") && (url.searchParams.get("after_seq") ?? "0") !== "0") nextPages.push(url.search);
    });
    await page.goto(`${world.url}/console/#/sessions?id=long-1`);
    const texts = page.getByTestId("messages").locator(".c2-message-text");
    await seeText(page, "message 50");
    assert.equal(await texts.count(), 50);
    await page.getByRole("button", { name: "More messages" }).dblclick();
    await seeText(page, "message 60");
    await page.getByRole("button", { name: "More messages" }).waitFor({ state: "detached" });
    assert.equal(await texts.count(), 60, "no message twice");
    assert.equal(nextPages.length, 1, `one request for the second page: ${nextPages}`);
    assert.deepEqual(await world.problems(page), []);
  });

  it("finds a task context by a sub-task, and shows a plan with its working memory", async () => {
    const page = await world.page(alice);
    page.setDefaultTimeout(60_000);
    await page.goto(`${world.url}/console/#/workflow`);
    await page.getByLabel("Look up by").selectOption("subtask");
    await page.getByLabel("Id", { exact: true }).fill("search-2");
    await page.getByRole("button", { name: "Look up", exact: true }).click();
    const task = page.getByTestId("task-context");
    await task.getByRole("heading", { name: "Task task-1" }).waitFor();
    assert.deepEqual(await task.locator("li code").allTextContents(), ["search-1", "search-2"]);
    await seeText(page, "research.completed");
    await world.screenshot(page, "workflow");

    await page.getByTestId("plans").getByRole("link", { name: "plan-7" }).click();
    await page.getByRole("heading", { name: "Plan plan-7" }).waitFor();
    const working = page.getByTestId("working-memory");
    await working.locator("tbody tr").first().waitFor();
    assert.equal(await working.locator("tbody tr td:first-child").textContent(), "hotel");
    assert.deepEqual(JSON.parse(await working.locator("tbody tr pre").textContent() ?? ""), { name: "Alfama Inn", nights: 3 });
    await world.screenshot(page, "workflow-plan");
    assert.deepEqual(await world.problems(page), []);
  });

  it("says in its own words, not the browser's, that the service did not answer", async () => {
    const page = await world.page(alice);
    page.setDefaultTimeout(60_000);
    await page.route((url) => url.pathname === "/v1/memory/plans", (route) => route.abort("connectionrefused"));
    await page.goto(`${world.url}/console/#/workflow`);
    const alert = page.getByRole("alert");
    await alert.waitFor();
    assert.equal(await alert.textContent(), "The service did not answer.");
  });
});
