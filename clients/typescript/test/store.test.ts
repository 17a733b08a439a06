/**
 * LangGraph.js's own store tests, adapted to build `MemsvcStore` against a live `memsvc serve`.
 *
 * Adapted from langchain-ai/langgraphjs, libs/checkpoint-postgres/src/tests/store.int.test.ts
 * (MIT License, Copyright (c) 2024 LangChain; see test/LICENSE.langgraphjs). Each upstream test
 * keeps its name and its assertions; where upstream creates a Postgres database per test we
 * take a fresh tenant (an admin token of a new tenant: an empty store). Tests that exercise
 * Postgres itself (connection strings, migrations, table statistics, the mock embedder's call
 * log, distance metrics) are skipped or adapted; README.md lists each with the reason.
 */

import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { TransientError } from "memsvc-client";
import { MemsvcStore, mergeConditions, minutesToTtlSeconds, translateFilter, type MemsvcStoreOptions } from "memsvc-client/store";
import { startServer, type LiveServer } from "./server.js";

let server: LiveServer;
let tenants = 0;

const tenantToken = (n: number) => server.token({ sub: "suite", tenant: `t${n}-${process.pid}`, roles: ["admin"] });

before(async () => {
  server = await startServer();
});
after(async () => server?.stop());

/** A store over an empty tenant: what upstream's `CREATE DATABASE` per test gives. */
async function freshStore(options: Omit<MemsvcStoreOptions, "url" | "token"> = {}): Promise<MemsvcStore> {
  tenants += 1;
  const token = await tenantToken(tenants);
  return new MemsvcStore({ url: server.url, token, ...options });
}

/** Upstream's `expect(xs).toContainEqual(x)`. */
function containsEqual(xs: unknown[], x: unknown): boolean {
  return xs.some((y) => {
    try {
      assert.deepEqual(y, x);
      return true;
    } catch {
      return false;
    }
  });
}

describe("MemsvcStore Batch Operations", () => {
  let store: MemsvcStore;
  beforeEach(async () => {
    store = await freshStore();
  });

  it("should handle batch put and get operations", async () => {
    // Given
    const operations = [
      { namespace: ["batch"], key: "item1", value: { data: "first" } },
      { namespace: ["batch"], key: "item2", value: { data: "second" } },
      { namespace: ["batch"], key: "item1" }, // get operation
    ];

    // When
    const results = await store.batch(operations);

    // Then
    assert.equal(results.length, 3);
    assert.equal(results[0], undefined); // put result
    assert.equal(results[1], undefined); // put result
    assert.notEqual(results[2], undefined); // get result
    const getResult = results[2];
    // As in LangGraph's stores, a read sees the state from before the batch's writes: null here.
    if (getResult && typeof getResult === "object" && "value" in getResult) {
      assert.deepEqual(getResult.value, { data: "first" });
    }
    // memsvc: and after the batch, the puts are there.
    assert.deepEqual((await store.get(["batch"], "item1"))?.value, { data: "first" });
  });

  it("should handle batch with mixed valid and invalid operations", async () => {
    // Given
    const operations = [
      { namespace: ["batch"], key: "item1", value: { data: "first" } },
      { namespace: [], key: "item2", value: { data: "invalid" } }, // invalid namespace
      { namespace: ["batch"], key: "item1" },
    ];

    // When/Then
    await assert.rejects(store.batch(operations), /Namespace cannot be empty/);
    // memsvc: validation comes before anything is sent
    assert.equal(await store.get(["batch"], "item1"), null);
  });
});

describe("MemsvcStore CRUD Operations", () => {
  let store: MemsvcStore;
  let storeWithVectors: MemsvcStore;

  beforeEach(async () => {
    // Regular store without vector indexing
    store = await freshStore();
    // Store with vector indexing (the service embeds with its own model: only `fields` matters)
    storeWithVectors = new MemsvcStore({ client: store.client, index: { fields: ["content", "title"] } });
  });

  it("should store and retrieve a simple item", async () => {
    // Given
    const namespace = ["crud", "simple"];
    const key = "item1";
    const value = { foo: "bar", num: 42 };

    // When
    await store.put(namespace, key, value);
    const item = await store.get(namespace, key);

    // Then
    assert.ok(item);
    assert.deepEqual(item.namespace, namespace);
    assert.equal(item.key, key);
    assert.deepEqual(item.value, value);
    assert.ok(item.createdAt instanceof Date && !Number.isNaN(item.createdAt.getTime()));
    assert.ok(item.updatedAt instanceof Date && !Number.isNaN(item.updatedAt.getTime()));
  });

  it("should update an existing item", async () => {
    // Given
    const namespace = ["crud", "update"];
    const key = "item2";
    const originalValue = { foo: "bar" };
    const updatedValue = { foo: "baz", extra: 123 };
    await store.put(namespace, key, originalValue);
    const originalItem = await store.get(namespace, key);

    // When
    await store.put(namespace, key, updatedValue);
    const updatedItem = await store.get(namespace, key);

    // Then
    assert.deepEqual(originalItem?.value, originalValue);
    assert.deepEqual(updatedItem?.value, updatedValue);
    assert.ok(updatedItem!.updatedAt.getTime() > (originalItem?.updatedAt.getTime() || 0));
    // memsvc: created_at survives updates
    assert.equal(updatedItem!.createdAt.getTime(), originalItem!.createdAt.getTime());
  });

  it("should delete an item", async () => {
    // Given
    const namespace = ["crud", "delete"];
    const key = "item3";
    const value = { toDelete: true };
    await store.put(namespace, key, value);
    let item = await store.get(namespace, key);
    assert.ok(item);

    // When
    await store.delete(namespace, key);
    item = await store.get(namespace, key);

    // Then
    assert.equal(item, null);
  });

  it("should handle complex JSON values", async () => {
    // Given
    const namespace = ["crud", "complex"];
    const key = "item4";
    const complexValue = {
      string: "test",
      number: 42,
      boolean: true,
      null: null,
      array: [1, 2, 3, "four"],
      nested: { deep: { value: "nested data" } },
    };

    // When
    await store.put(namespace, key, complexValue);
    const retrieved = await store.get(namespace, key);

    // Then
    assert.deepEqual(retrieved?.value, complexValue);
  });

  it("should return null for non-existent items", async () => {
    assert.equal(await store.get(["crud", "missing"], "nope"), null);
  });

  it("should not allow empty namespace", async () => {
    await assert.rejects(store.put([], "key", { foo: "bar" }), /Namespace cannot be empty/);
  });

  it("should not allow namespace labels with periods", async () => {
    await assert.rejects(store.put(["invalid.namespace"], "key", { foo: "bar" }), /Namespace labels cannot contain periods/);
  });

  it("should not allow empty namespace label", async () => {
    await assert.rejects(store.put(["valid", ""], "key", { foo: "bar" }), /Namespace labels cannot be empty strings/);
  });

  it("should not allow non-string namespace label", async () => {
    await assert.rejects(store.put(["valid", 123 as unknown as string], "key", { foo: "bar" }), /Namespace labels must be strings/);
  });

  it("should not allow reserved namespace label", async () => {
    await assert.rejects(store.put(["langgraph"], "key", { foo: "bar" }), /Root label for namespace cannot be "langgraph"/);
  });

  it("should support TTL options", async () => {
    // Given
    const namespace = ["ttl", "custom"];
    const key = "tempItem";
    const value = { data: "temporary data" };

    // When
    await store.put(namespace, key, value, undefined, { ttl: 5 }); // 5 minutes TTL
    const item = await store.get(namespace, key);

    // Then
    assert.ok(item);
    assert.deepEqual(item.value, value);
    // memsvc: the expiry is 5 minutes after the write
    const raw = await store.client.get(namespace, key);
    const ttlMs = Date.parse(raw.expires_at!) - Date.parse(raw.updated_at);
    assert.ok(ttlMs > 4 * 60_000 && ttlMs <= 5 * 60_000 + 1000, `expires ${ttlMs} ms after the write`);
  });

  it("should support index: false to disable vector indexing", async () => {
    // Given
    const namespace = ["vectors", "no-index"];
    const key = "doc1";
    const value = { title: "Test Document", content: "This content should not be indexed" };

    // When
    await storeWithVectors.put(namespace, key, value, false); // Disable indexing

    // (upstream checks that the mock embedder was not called: ours is the service's)

    // When - search for this item
    const results = await storeWithVectors.search(namespace, { query: "test document" });

    // Then - item should not be found via vector search
    assert.equal(results.length, 0);
    // memsvc: it is there, found by a search without a query
    assert.equal((await storeWithVectors.search(namespace)).length, 1);
  });

  it("should support specific fields to index", async () => {
    // Given
    const namespace = ["vectors", "selective"];
    const key = "doc1";
    const value = {
      title: "Indexed Title",
      content: "Not indexed content",
      summary: "Indexed summary",
      metadata: { author: "Test Author" },
    };

    // When
    await storeWithVectors.put(namespace, key, value, ["title", "summary"]); // Only index these fields

    // (upstream inspects the mock embedder's calls; memsvc: only indexed fields can match a
    // keyword query, so a word of the content alone finds nothing)
    const keyword = new MemsvcStore({ client: store.client, searchMode: "keyword" });
    assert.equal((await keyword.search(namespace, { query: "Not" })).length, 0);
    assert.equal((await keyword.search(namespace, { query: "summary" })).length, 1);

    // When - search for indexed content
    const results = await storeWithVectors.search(namespace, { query: "indexed summary" });

    // Then - item should be found
    assert.ok(results.length > 0);
  });

  it("should support both TTL and indexing options", async () => {
    // Given
    const namespace = ["vectors", "combined"];
    const key = "doc1";
    const value = { title: "Combined Options Test", content: "Testing both TTL and indexing options" };

    // When
    await storeWithVectors.put(namespace, key, value, ["title"], { ttl: 10 }); // 10 minutes TTL

    // Then - item should be retrievable
    const item = await storeWithVectors.get(namespace, key);
    assert.ok(item);
    assert.deepEqual(item.value, value);

    // (upstream reads the Postgres vector table; memsvc: the keyword index holds the title only)
    const keyword = new MemsvcStore({ client: store.client, searchMode: "keyword" });
    assert.equal((await keyword.search(namespace, { query: "Combined" })).length, 1);
    assert.equal((await keyword.search(namespace, { query: "indexing" })).length, 0);
    const raw = await store.client.get(namespace, key);
    assert.ok(raw.expires_at);
  });
});

describe("MemsvcStore Error Handling", () => {
  it("should handle database connection errors gracefully", async () => {
    // (upstream: a Postgres URL nobody listens on; here a memsvc URL nobody listens on)
    const dead = new MemsvcStore({ url: "http://127.0.0.1:9", token: "t", maxRetries: 0 });
    const error = await dead.get(["test"], "key").catch((e) => e);
    assert.ok(error instanceof TransientError);
    assert.equal(error.code, "UNAVAILABLE");
  });

  it("should handle malformed connection strings", () => {
    assert.throws(() => new MemsvcStore({ url: "", token: "t" }), /no service URL/);
  });

  const NO_UNINDEXED_STORE = "memsvc always embeds (the service's own model): there is no store without a vector configuration to refuse a vector or hybrid search";
  it("should throw error when using vector search mode without vector configuration", { skip: NO_UNINDEXED_STORE }, () => {});
  it("should throw error when using hybrid search mode without vector configuration", { skip: NO_UNINDEXED_STORE }, () => {});
  it("should throw error when using vectorSearch directly without vector configuration", { skip: "vectorSearch() is a PostgresStore method, not BaseStore's" }, () => {});
  it("should throw error when using hybridSearch directly without vector configuration", { skip: "hybridSearch() is a PostgresStore method, not BaseStore's" }, () => {});

  it("should handle unknown search mode", async () => {
    const store = new MemsvcStore({ client: (await freshStore()).client, searchMode: "fuzzy" as never });
    await store.put(["docs"], "d", { text: "x" });
    await assert.rejects(store.search(["docs"], { query: "x" }), /INVALID_ARGUMENT|mode/);
  });
});

const DOCS = {
  doc1: { title: "Machine Learning Guide", content: "Comprehensive guide to machine learning algorithms and techniques" },
  doc2: { title: "Data Science Handbook", content: "Statistical methods and data analysis for scientists" },
  doc3: { title: "AI Research Paper", content: "Latest research in artificial intelligence and neural networks" },
};

describe("MemsvcStore Hybrid Search", () => {
  let store: MemsvcStore;
  beforeEach(async () => {
    store = new MemsvcStore({ client: (await freshStore()).client, index: { fields: ["content", "title"] }, searchMode: "hybrid" });
    await store.batch(Object.entries(DOCS).map(([key, value]) => ({ namespace: ["docs"], key, value })));
  });

  it("should combine vector and text search effectively", async () => {
    // (upstream varies vectorWeight, a Postgres option; memsvc fuses the two itself)
    const hybrid = await store.search(["docs"], { query: "machine learning algorithms", limit: 10 });
    assert.ok(hybrid.length > 0);
    assert.ok(hybrid.every((item) => typeof item.score === "number"));
    assert.equal(hybrid[0].key, "doc1");
  });

  it("should maintain result ordering by score", async () => {
    const results = await store.search(["docs"], { query: "machine learning algorithms", limit: 10 });
    for (let i = 1; i < results.length; i += 1) assert.ok(results[i - 1].score! >= results[i].score!);
  });

  it("should support hybrid mode in unified search method", async () => {
    const results = await store.search(["docs"], { query: "machine learning algorithms", limit: 10 });
    assert.ok(Array.isArray(results));
    assert.ok(results.length > 0);
    assert.ok(results.every((item) => typeof item.score === "number"));
  });

  it("should pass appropriate parameters through to hybrid search", async () => {
    const results = await store.search(["docs"], { query: "neural networks research", limit: 5 });
    const directResults = await store.batch([{ namespacePrefix: ["docs"], query: "neural networks research", limit: 5 }]);
    assert.equal(results.length, directResults[0].length);
    assert.deepEqual(results.map((r) => r.key), directResults[0].map((r) => r.key));
    assert.equal(results[0].key, "doc3");
  });
});

describe("MemsvcStore Namespace Listing", () => {
  let store: MemsvcStore;
  beforeEach(async () => {
    store = await freshStore();
  });

  it("should list all namespaces", async () => {
    // Given
    await store.put(["docs", "v1"], "item1", { data: "test" });
    await store.put(["docs", "v2"], "item2", { data: "test" });
    await store.put(["cache", "temp"], "item3", { data: "test" });

    // When
    const namespaces = await store.listNamespaces();

    // Then
    assert.ok(namespaces.length > 0);
    assert.ok(containsEqual(namespaces, ["docs", "v1"]));
    assert.ok(containsEqual(namespaces, ["docs", "v2"]));
    assert.ok(containsEqual(namespaces, ["cache", "temp"]));
  });

  it("should list namespaces with prefix filter", async () => {
    // Given
    await store.put(["docs", "v1"], "item1", { data: "test" });
    await store.put(["docs", "v2"], "item2", { data: "test" });
    await store.put(["cache", "temp"], "item3", { data: "test" });

    // When
    const namespaces = await store.listNamespaces({ prefix: ["docs"] });

    // Then
    assert.equal(namespaces.length, 2);
    assert.ok(containsEqual(namespaces, ["docs", "v1"]));
    assert.ok(containsEqual(namespaces, ["docs", "v2"]));
    assert.ok(!containsEqual(namespaces, ["cache", "temp"]));
  });

  // memsvc: suffix, wildcards, max depth, paging (upstream's Python suite covers these too)
  it("should list namespaces with suffix, wildcard, maxDepth, limit and offset", async () => {
    await store.batch([
      { namespace: ["a", "b", "c"], key: "k", value: { v: 1 } },
      { namespace: ["a", "x", "c"], key: "k", value: { v: 1 } },
      { namespace: ["a", "b", "d"], key: "k", value: { v: 1 } },
    ]);
    assert.deepEqual(await store.listNamespaces({ suffix: ["c"] }), [["a", "b", "c"], ["a", "x", "c"]]);
    assert.deepEqual(await store.listNamespaces({ prefix: ["a", "*", "d"] }), [["a", "b", "d"]]);
    assert.deepEqual(await store.listNamespaces({ maxDepth: 2 }), [["a", "b"], ["a", "x"]]);
    assert.deepEqual(await store.listNamespaces({ limit: 1, offset: 1 }), [["a", "b", "d"]]);
    assert.deepEqual(await store.listNamespaces({ maxDepth: 99 }), [["a", "b", "c"], ["a", "b", "d"], ["a", "x", "c"]]);
  });
});

describe("MemsvcStore Search", () => {
  let store: MemsvcStore;

  beforeEach(async () => {
    store = await freshStore();
    // Setup test data
    await store.batch([
      { namespace: ["docs"], key: "doc1", value: { title: "JavaScript Guide", content: "Complete guide to JavaScript programming", category: "programming", difficulty: "beginner", tags: ["javascript", "web", "tutorial"] } },
      { namespace: ["docs"], key: "doc2", value: { title: "TypeScript Handbook", content: "Advanced TypeScript programming techniques", category: "programming", difficulty: "intermediate", tags: ["typescript", "javascript", "types"] } },
      { namespace: ["docs"], key: "doc3", value: { title: "Python Basics", content: "Introduction to Python programming language", category: "programming", difficulty: "beginner", tags: ["python", "basics"] } },
      { namespace: ["recipes"], key: "recipe1", value: { title: "Chocolate Cake", content: "Delicious chocolate cake recipe with detailed instructions", category: "dessert", difficulty: "easy", tags: ["chocolate", "cake", "baking"] } },
    ]);
  });

  it("should perform basic search with no options", async () => {
    const results = await store.search(["docs"]);
    assert.ok(Array.isArray(results));
    assert.ok(results.length > 0);
    assert.ok(results.every((item) => item.namespace[0] === "docs"));
  });

  it("should search with simple filter", async () => {
    const results = await store.search(["docs"], { filter: { category: "programming" } });
    assert.equal(results.length, 3);
    assert.ok(results.every((item) => item.value.category === "programming"));
  });

  it("should search with advanced filter operators", async () => {
    const results = await store.search(["docs"], { filter: { difficulty: { $eq: "beginner" } } });
    assert.equal(results.length, 2);
    assert.ok(results.every((item) => item.value.difficulty === "beginner"));
  });

  it("should search with multiple filter conditions", async () => {
    const results = await store.search(["docs"], { filter: { category: "programming", difficulty: { $ne: "advanced" } } });
    assert.ok(results.length > 0);
    assert.ok(results.every((item) => item.value.category === "programming" && item.value.difficulty !== "advanced"));
  });

  it("should search with $in operator", async () => {
    const results = await store.search(["docs"], { filter: { difficulty: { $in: ["beginner", "intermediate"] } } });
    assert.equal(results.length, 3);
    assert.ok(results.every((item) => ["beginner", "intermediate"].includes(item.value.difficulty)));
  });

  it("should apply limit and offset", async () => {
    const page1 = await store.search(["docs"], { limit: 2, offset: 0 });
    const page2 = await store.search(["docs"], { limit: 2, offset: 2 });
    assert.ok(page1.length <= 2);
    assert.ok(page2.length >= 0);
    const page2Keys = page2.map((item) => item.key);
    assert.deepEqual(page1.map((item) => item.key).filter((key) => page2Keys.includes(key)), []);
    assert.equal(page1.length + page2.length, 3); // memsvc: the pages cover the namespace
  });

  it("should return empty array for non-existent namespace", async () => {
    assert.deepEqual(await store.search(["nonexistent"]), []);
  });

  it("should support text search mode", async () => {
    const text = new MemsvcStore({ client: store.client, searchMode: "keyword" }); // upstream's mode: "text"
    const results = await text.search(["docs"], { query: "JavaScript" });
    assert.ok(results.length > 0);
    assert.ok(results.some((item) => item.value.title.includes("JavaScript") || item.value.content.includes("JavaScript")));
  });

  it("should perform full-text search with auto mode defaulting to text", async () => {
    const results = await store.search(["docs"], { query: "programming" }); // the service's default mode
    assert.ok(results.length > 0);
    assert.ok(results.some((item) => item.value.title.includes("programming") || item.value.content.includes("programming") || item.value.category === "programming"));
  });

  it("should combine filtering with text search", async () => {
    const text = new MemsvcStore({ client: store.client, searchMode: "keyword" });
    const results = await text.search(["docs"], { query: "guide", filter: { difficulty: "beginner" } });
    assert.ok(results.length > 0);
    assert.ok(results.every((item) => item.value.difficulty === "beginner"));
    assert.ok(results.some((item) => item.value.title.toLowerCase().includes("guide") || item.value.content.toLowerCase().includes("guide")));
  });

  // memsvc: nested filters become dot paths, comparison operators, and pages past the API's 100
  it("should filter on nested values and comparisons", async () => {
    await store.batch([
      { namespace: ["nums"], key: "a", value: { n: 1, meta: { lang: "en" } } },
      { namespace: ["nums"], key: "b", value: { n: 5, meta: { lang: "fr" } } },
      { namespace: ["nums"], key: "c", value: { n: 9, meta: { lang: "en" } } },
    ]);
    const en = await store.search(["nums"], { filter: { meta: { lang: "en" } } });
    assert.deepEqual(en.map((i) => i.key).sort(), ["a", "c"]);
    const big = await store.search(["nums"], { filter: { n: { $gt: 3, $lte: 9 } } });
    assert.deepEqual(big.map((i) => i.key).sort(), ["b", "c"]);
    await assert.rejects(store.search(["nums"], { filter: { "a..b": 1 } }), /Invalid filter key/);
  });
});

describe("MemsvcStore Statistics", () => {
  const WHY = "getStats() is a PostgresStore method (row counts of its tables), not BaseStore's; memsvc's counts are GET /admin/v1/memories/index/status and /metrics";
  it("should provide accurate store statistics", { skip: WHY }, () => {});
  it("should handle empty store statistics", { skip: WHY }, () => {});
});

describe("MemsvcStore TTL", () => {
  let store: MemsvcStore;
  beforeEach(async () => {
    store = new MemsvcStore({
      client: (await freshStore()).client,
      ttl: { defaultTtl: 1, refreshOnRead: true, sweepIntervalMinutes: 1 }, // 1 minute
    });
  });

  it("should support TTL configuration and sweep", async () => {
    await store.put(["test"], "ttl-item", { data: "expires" });
    const item = await store.get(["test"], "ttl-item");
    const sweptCount = await store.sweepExpiredItems();
    assert.ok(item);
    assert.deepEqual(item.value, { data: "expires" });
    assert.equal(typeof sweptCount, "number");
    assert.ok(sweptCount >= 0);
    // memsvc: the default TTL is applied, and `ttl: null` means none
    assert.ok((await store.client.get(["test"], "ttl-item")).expires_at);
    await store.put(["test"], "forever", { data: "stays" }, undefined, { ttl: null });
    assert.equal((await store.client.get(["test"], "forever")).expires_at, null);
  });

  it("should refresh TTL on read", async () => {
    await store.put(["test"], "refresh-item", { data: "refresh test" });
    const before = (await store.client.get(["test"], "refresh-item")).expires_at!;
    const item1 = await store.get(["test"], "refresh-item");
    const item2 = await store.get(["test"], "refresh-item");
    assert.ok(item1);
    assert.ok(item2);
    assert.deepEqual(item2.value, { data: "refresh test" });
    // memsvc: a refreshing read moves the expiry forward (never back)
    const afterRead = (await store.client.get(["test"], "refresh-item")).expires_at!;
    assert.ok(Date.parse(afterRead) >= Date.parse(before));
  });
});

describe("MemsvcStore Vector Search", () => {
  let store: MemsvcStore;
  beforeEach(async () => {
    store = new MemsvcStore({ client: (await freshStore()).client, index: { fields: ["content", "title"] }, searchMode: "semantic" });
  });

  it("should support vector search", async () => {
    await store.put(["docs"], "doc1", { title: "Machine Learning Basics", content: "Introduction to neural networks and deep learning" });
    await store.put(["docs"], "doc2", { title: "Data Science Guide", content: "Statistical analysis and data visualization techniques" });
    const results = await store.search(["docs"], { query: "artificial intelligence", limit: 5 });
    assert.ok(Array.isArray(results));
    assert.equal(results[0].key, "doc1"); // memsvc: a real embedder ranks the neural-network doc first
  });

  it("should handle different distance metrics", { skip: "distanceMetric is a PostgresStore search option; memsvc ranks by cosine similarity only" }, () => {});
  it("should respect similarity thresholds", { skip: "similarityThreshold is a PostgresStore search option BaseStore.search does not have (MemsvcClient.search takes minScore)" }, () => {});

  it("should extract text from JSON paths correctly", async () => {
    const testObj = {
      title: "Test Document",
      content: { sections: [{ text: "Section 1 content" }, { text: "Section 2 content" }] },
      tags: ["ai", "ml", "nlp"],
      metadata: { author: "Test Author", version: 1 },
    };
    await store.put(["test"], "doc1", testObj);
    await store.put(["test"], "doc2", { title: "Something else entirely", content: "Cooking pasta at home" });
    const searchResults = await store.search(["test"], { query: "Test Document" });
    assert.ok(searchResults.length > 0);
    assert.equal(searchResults[0].key, "doc1");
    // memsvc: `arr[*].field` paths index every element
    await store.put(["paths"], "p", testObj, ["content.sections[*].text"]);
    const keyword = new MemsvcStore({ client: store.client, searchMode: "keyword" });
    assert.equal((await keyword.search(["paths"], { query: "Section" })).length, 1);
    assert.equal((await keyword.search(["paths"], { query: "Document" })).length, 0);
  });

  it("should support vector mode in unified search method", async () => {
    await store.put(["unified"], "doc1", { title: "Neural Networks", content: "Deep learning architectures and applications" });
    const results = await store.search(["unified"], { query: "artificial intelligence" });
    assert.ok(results.length > 0);
    assert.equal(typeof results[0].score, "number");
  });

  it("should use vector search by default when in auto mode with vector config", async () => {
    const auto = new MemsvcStore({ client: store.client }); // no mode: the service's default
    await auto.put(["auto"], "doc1", { title: "Machine Learning", content: "Algorithms for pattern recognition" });
    const results = await auto.search(["auto"], { query: "data science techniques" });
    assert.ok(Array.isArray(results));
    assert.equal(results.length, 1);
  });

  it("should honor index: false parameter when putting items", async () => {
    await store.put(["no-index"], "doc1", { title: "Not Indexed Document", content: "This content should not be indexed for vector search" }, false);
    const results = await store.search(["no-index"], { query: "not indexed content" });
    assert.equal(results.length, 0);
  });

  it("should respect specific fields to index using index array parameter", async () => {
    await store.put(["selective-index"], "doc1", { title: "Selective Indexing Test", content: "Main content here", summary: "Summary text here", author: "Test Author" }, ["title", "summary"]);
    const results = await store.search(["selective-index"], { query: "summary text" });
    assert.ok(results.length > 0);
  });
});

describe("MemsvcStore Migration System", () => {
  const WHY = "Postgres schema migrations: the service owns its storage, a client has no setup() or schema";
  it("should properly track and apply store migrations", { skip: WHY }, () => {});
  it("should apply vector migrations when vector indexing is configured", { skip: WHY }, () => {});
  it("should handle migration failures gracefully", { skip: WHY }, () => {});
  it("should support multiple schemas with independent migrations", { skip: WHY }, () => {});
});

describe("MemsvcStore's mapping (no server)", () => {
  it("merges match conditions into one prefix and one suffix", () => {
    assert.deepEqual(mergeConditions([
      { matchType: "prefix", path: ["a", "*"] },
      { matchType: "prefix", path: ["*", "b", "c"] },
      { matchType: "suffix", path: ["z"] },
    ]), { prefix: ["a", "b", "c"], suffix: ["z"] });
    assert.equal(mergeConditions([{ matchType: "prefix", path: ["a"] }, { matchType: "prefix", path: ["b"] }]), null);
  });

  it("translates filters and TTLs as the Python client does", () => {
    assert.deepEqual(translateFilter({ meta: { lang: "en" }, n: { $gt: Infinity }, x: { $not: { $lt: -Infinity } }, t: [NaN] }), {
      "meta.lang": "en",
      n: { $gt: { $numberDouble: "Infinity" } },
      x: { $not: { $lt: { $numberDouble: "-Infinity" } } },
      t: [{ $numberDouble: "NaN" }],
    });
    assert.equal(minutesToTtlSeconds(5 / 60), 5);
    assert.equal(minutesToTtlSeconds(0.001), 1);
    assert.equal(minutesToTtlSeconds(null), null);
    assert.throws(() => minutesToTtlSeconds(0), /positive/);
  });

  it("sends a batch's reads before the puts they could observe, and only the last put to a key", async () => {
    const sent: string[] = [];
    const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(String(input));
      sent.push(`${init?.method} ${url.pathname}${url.search} ${init?.body ?? ""}`);
      if (init?.method === "GET") return new Response('{"error":{"code":"NOT_FOUND","message":"no"}}', { status: 404 });
      return new Response(init?.method === "POST" ? '{"items":[]}' : "{}", { status: 200 });
    }) as typeof globalThis.fetch;
    const store = new MemsvcStore({ url: "http://memsvc.test", token: "t", fetch, maxConcurrency: 1 });
    const results = await store.batch([
      { namespace: ["a"], key: "k", value: { v: 1 } },
      { namespace: ["a"], key: "k" },
      { namespace: ["b"], key: "k", value: { v: 2 } },
      { namespace: ["a"], key: "k", value: { v: 3 } },
      { namespacePrefix: ["c"], limit: 5 },
    ]);
    assert.deepEqual(results, [undefined, null, undefined, undefined, []]);
    assert.deepEqual(sent.map((x) => x.split(" ").slice(0, 2).join(" ")), [
      "GET /v1/memories?ns=a&key=k&refresh_ttl=true",
      "PUT /v1/memories",
      "POST /v1/memories/search",
      "PUT /v1/memories",
    ]);
    assert.match(sent[1], /"namespace":\["b"\]/);
    assert.match(sent[3], /"value":\{"v":3\}/);
  });
});
