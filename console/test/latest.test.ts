import assert from "node:assert/strict";
import { test } from "node:test";
import { Latest } from "../src/latest.js";

test("an answer is the latest only until another request begins", () => {
  const latest = new Latest();
  const first = latest.begin();
  assert.equal(first(), true);
  const second = latest.begin();
  assert.equal(first(), false, "the earlier answer, arriving after the second request began, is dropped");
  assert.equal(second(), true);
});

test("two views' guards do not interfere", () => {
  const graph = new Latest();
  const search = new Latest();
  const exploring = graph.begin();
  search.begin();
  assert.equal(exploring(), true);
});
