import assert from "node:assert/strict";
import { test } from "node:test";
import { distances, radialLayout } from "../src/views/graph-layout.js";

const edges = [
  { source: "a", target: "b" },
  { source: "b", target: "c" },
  { source: "d", target: "a" },
];

test("distances walk edges in either direction", () => {
  const d = distances("a", ["a", "b", "c", "d", "e"], edges);
  assert.deepEqual(Object.fromEntries(d), { a: 0, b: 1, d: 1, c: 2 });
});

test("the centre sits in the middle and each ring is further out than the last", () => {
  const layout = radialLayout("a", ["a", "b", "c", "d"], edges, { width: 800, height: 600, maxNodes: 100 });
  assert.deepEqual(layout.positions.get("a"), { x: 400, y: 300 });
  const radius = (id: string): number => Math.hypot(layout.positions.get(id)!.x - 400, layout.positions.get(id)!.y - 300);
  assert.ok(Math.abs(radius("b") - radius("d")) < 0.5, "one ring, one radius");
  assert.ok(radius("c") > radius("b") + 50);
  assert.equal(layout.dropped, 0);
});

test("every position is inside the canvas and no two entities share one", () => {
  const nodes = Array.from({ length: 60 }, (_, i) => `n${i}`);
  const star = nodes.slice(1).map((n, i) => ({ source: i % 2 ? "n0" : nodes[Math.max(1, i - 1)], target: n }));
  const layout = radialLayout("n0", nodes, star, { width: 800, height: 520, maxNodes: 100 });
  const seen = new Set<string>();
  for (const { x, y } of layout.positions.values()) {
    assert.ok(x >= 0 && x <= 800 && y >= 0 && y <= 520, `${x},${y} inside`);
    seen.add(`${x},${y}`);
  }
  assert.equal(seen.size, nodes.length);
});

test("the same input gives the same picture", () => {
  const a = radialLayout("a", ["a", "b", "c", "d"], edges, { width: 800, height: 600, maxNodes: 100 });
  const b = radialLayout("a", ["a", "b", "c", "d"], edges, { width: 800, height: 600, maxNodes: 100 });
  assert.deepEqual([...a.positions], [...b.positions]);
});

test("the cap keeps the nearest entities and counts the rest", () => {
  const layout = radialLayout("a", ["a", "b", "c", "d", "e"], edges, { width: 800, height: 600, maxNodes: 3 });
  assert.deepEqual(layout.kept, ["a", "b", "d"]);
  assert.equal(layout.dropped, 2);
  assert.equal(layout.positions.has("c"), false);
});

test("an entity not connected to the centre goes on an outer ring", () => {
  const layout = radialLayout("a", ["a", "b", "z"], [{ source: "a", target: "b" }], { width: 800, height: 600, maxNodes: 10 });
  assert.equal(layout.distance.get("z"), 2);
  assert.ok(layout.positions.has("z"));
});

test("an entity sits in its parent's wedge: a chain runs straight out from the centre", () => {
  const layout = radialLayout("a", ["a", "b", "c", "x"], [{ source: "a", target: "b" }, { source: "c", target: "b" }, { source: "a", target: "x" }],
    { width: 800, height: 800, maxNodes: 10 });
  const angle = (id: string): number => Math.atan2(layout.positions.get(id)!.y - 400, layout.positions.get(id)!.x - 400);
  assert.ok(Math.abs(angle("b") - angle("c")) < 1e-3, "c is straight behind its parent b");
  assert.ok(Math.abs(angle("b") - angle("x")) > 1, "the other branch is elsewhere");
});
