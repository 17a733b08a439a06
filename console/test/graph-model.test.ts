import assert from "node:assert/strict";
import { test } from "node:test";
import { emptyModel, inParallel, mergeNeighbours, mergePath, type GraphEntity, type Neighbour, type PathAnswer } from "../src/views/graph-model.js";

const entity = (id: string): GraphEntity => ({ id, name: id.toUpperCase(), type: "CONCEPT", namespaces: [["n"]], explicit: false });
const memory = (key: string) => ({ namespace: ["n"], key, id: `id-${key}` });

function path(...steps: [string, string, string, string | null][]): PathAnswer {
  return {
    found: true, hops: steps.length, truncated: false,
    entities: [entity(steps[0][0]), ...steps.map(([, , target]) => entity(target))],
    steps: steps.map(([source, type, target, key]) => ({
      source: entity(source), target: entity(target),
      edges: [{ source, type, target, namespace: ["n"], memory: key ? memory(key) : null }],
    })),
  };
}

test("a path's entities and edges join the model; one edge per relation type and direction, each memory once", () => {
  const model = emptyModel(entity("a"));
  const first = mergePath(model, path(["a", "USES", "b", "m1"], ["b", "PART_OF", "c", null]));
  assert.equal(first.length, 2);
  assert.deepEqual([...model.entities.keys()].sort(), ["a", "b", "c"]);
  mergePath(model, path(["a", "USES", "b", "m1"]));
  mergePath(model, path(["a", "USES", "b", "m2"]));
  const uses = [...model.edges.values()].find((e) => e.type === "USES");
  assert.deepEqual(uses?.relations.map((r) => r.memory?.key), ["m1", "m2"]);
  assert.equal(model.edges.size, 2);
});

function neighbour(relation: string, direction: "out" | "in", id: string, key: string | null): Neighbour {
  return { relation, direction, entity: entity(id), namespace: ["n"], memory: key ? memory(key) : null };
}

test("neighbours join the model as edges in their own direction; only new entities are answered", () => {
  const model = emptyModel(entity("a"));
  const added = mergeNeighbours(model, "a", [neighbour("USES", "out", "b", "m1"), neighbour("OWNS", "in", "c", null),
    neighbour("USES", "out", "b", "m2")]);
  assert.deepEqual(added.map((e) => e.id), ["b", "c"]);
  assert.deepEqual([...model.edges.values()].map((g) => [g.source, g.type, g.target, g.relations.length]),
    [["a", "USES", "b", 2], ["c", "OWNS", "a", 1]]);
  assert.deepEqual(mergeNeighbours(model, "b", [neighbour("USES", "in", "a", "m1")]), [], "a known entity is not new");
  assert.equal(model.edges.size, 2, "the same relation seen from its other end is one edge");
});

test("past 100 entities the rest are left out with their relations, and the model says so", () => {
  const model = emptyModel(entity("a"));
  const many = Array.from({ length: 120 }, (_, n) => neighbour("USES", "out", `e${n}`, `m${n}`));
  assert.equal(mergeNeighbours(model, "a", many).length, 99);
  assert.equal(model.entities.size, 100);
  assert.equal(model.edges.size, 99);
  assert.equal(model.truncated, true);
});

test("a path not found adds nothing but says when the traversal was cut", () => {
  const model = emptyModel(entity("a"));
  assert.deepEqual(mergePath(model, { found: false, hops: 0, entities: [], steps: [], truncated: true }), []);
  assert.equal(model.entities.size, 1);
  assert.equal(model.truncated, true);
});

test("work runs at most `width` at a time and answers in the items' order", async () => {
  let running = 0;
  let most = 0;
  const answers = await inParallel([5, 1, 4, 2, 3], 2, async (n) => {
    running += 1;
    most = Math.max(most, running);
    await new Promise((r) => setImmediate(r));
    running -= 1;
    return n * 10;
  });
  assert.deepEqual(answers, [50, 10, 40, 20, 30]);
  assert.equal(most, 2);
});
