import assert from "node:assert/strict";
import { test } from "node:test";
import { ViewSwitch, type Leave } from "../src/view-switch.js";

/** A view's drawing that finishes when the test says so. */
function held(): { draw: () => Promise<Leave>; finish(leave: Leave): void; fail(error: Error): void } {
  let finish: (leave: Leave) => void = () => undefined;
  let fail: (error: Error) => void = () => undefined;
  const drawn = new Promise<Leave>((resolve, reject) => { finish = resolve; fail = reject; });
  return { draw: () => drawn, finish: (leave) => finish(leave), fail: (error) => fail(error) };
}

test("leaving a view stops it before the next one is drawn", async () => {
  const views = new ViewSwitch();
  const order: string[] = [];
  assert.equal(await views.enter(() => () => order.push("timeline stopped")), true);
  await views.enter(() => { order.push("memories drawn"); });
  assert.deepEqual(order, ["timeline stopped", "memories drawn"]);
});

test("a slow view left before it is drawn does not take the place of the view that followed", async () => {
  const views = new ViewSwitch();
  const slow = held();
  const stopped: string[] = [];
  const policies = views.enter(slow.draw);
  assert.equal(await views.enter(() => () => stopped.push("timeline")), true);
  slow.finish(undefined);
  assert.equal(await policies, false, "the late view is not current");
  await views.enter(() => undefined);
  assert.deepEqual(stopped, ["timeline"], "leaving the timeline still stops its poller");
});

test("a late view that started something is stopped as soon as it is drawn", async () => {
  const views = new ViewSwitch();
  const slow = held();
  const stopped: string[] = [];
  const late = views.enter(slow.draw);
  await views.enter(() => undefined);
  slow.finish(() => stopped.push("late view"));
  assert.equal(await late, false);
  assert.deepEqual(stopped, ["late view"]);
});

test("a drawing error reaches the caller only while its view is current", async () => {
  const views = new ViewSwitch();
  await assert.rejects(views.enter(() => Promise.reject(new Error("shown"))), /shown/);
  const slow = held();
  const late = views.enter(slow.draw);
  await views.enter(() => undefined);
  slow.fail(new Error("nowhere to show it"));
  assert.equal(await late, false);
});
