import assert from "node:assert/strict";
import { test } from "node:test";
import { emptyModel, inParallel, mergePath, type GraphEntity, type PathAnswer } from "../src/views/graph-model.js";

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
