/**
 * LangGraph's own JS SDK, unchanged, against memsvc's LangGraph Platform store API (issue 28):
 * `new Client({apiUrl, defaultHeaders}).store` (`StoreClient` of `@langchain/langgraph-sdk`)
 * pointed at a live `memsvc serve`. Put and get (a missing item is null), delete, search by
 * filter and by query, namespaces with prefix, suffix and maxDepth, TTL in minutes, and
 * isolation between users and tenants. The Python twin is tests/api/test_langgraph_store_api.py.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client, type Item } from "@langchain/langgraph-sdk";
import type { StoreClient } from "@langchain/langgraph-sdk/client";
import { MemsvcClient } from "memsvc-client";
import { startServer, type LiveServer } from "./server.js";

let server: LiveServer;
const TENANT = `lg-${process.pid}`;
let users = 0;

before(async () => {
  server = await startServer();
});
after(async () => server?.stop());

interface User {
  sub: string;
  /** ["user", sub]: the namespace the user owns. */
  home: string[];
  /** LangGraph's StoreClient, as a LangGraph app would build it (apiKey: null: no LANGGRAPH_API_KEY from the environment). */
  store: StoreClient;
  /** memsvc's own client, to look at what the SDK does not return (expires_at). */
  memsvc: MemsvcClient;
}

/** A new user (unique sub) in `tenant`, or the same sub in another tenant. */
async function user(sub = `u${(users += 1)}-${process.pid}`, tenant = TENANT): Promise<User> {
  const token = await server.token({ sub, tenant });
  const client = new Client({ apiUrl: server.url, apiKey: null, defaultHeaders: { Authorization: `Bearer ${token}` } });
  return { sub, home: ["user", sub], store: client.store, memsvc: new MemsvcClient({ url: server.url, token }) };
}

/** The SDK's error for a refused request: its HTTPError carries `status` and the body as `text`. */
async function refusal(call: Promise<unknown>): Promise<{ status: number; body: { error: Record<string, unknown> } }> {
  const error = (await call.then(
    () => assert.fail("expected the call to be refused"),
    (e: unknown) => e,
  )) as { status?: number; text?: string; message: string };
  assert.equal(typeof error.status, "number", error.message);
  return { status: error.status!, body: JSON.parse(error.text!) };
}

const seconds = (a: string, b: string) => (Date.parse(a) - Date.parse(b)) / 1000;

describe("LangGraph's JS SDK StoreClient against memsvc", () => {
  it("putItem, getItem (a missing item is null) and deleteItem", async () => {
    const { store, home } = await user();
    const ns = [...home, "notes"];
    assert.equal(await store.putItem(ns, "tip", { text: "Python uses indentation", stars: 5 }), undefined);
    const item = (await store.getItem(ns, "tip")) as Item & Record<string, unknown>;
    assert.deepEqual(item.namespace, ns);
    assert.equal(item.key, "tip");
    assert.deepEqual(item.value, { text: "Python uses indentation", stars: 5 });
    // The SDK copies created_at/updated_at to createdAt/updatedAt: both come from the wire.
    assert.ok(Date.parse(item.createdAt) > 0 && item.createdAt === item.created_at);
    assert.equal(item.updatedAt, item.createdAt);

    await store.putItem(ns, "tip", { text: "Python blocks are indented" });
    const again = (await store.getItem(ns, "tip"))!;
    assert.deepEqual(again.value, { text: "Python blocks are indented" });
    assert.equal(again.createdAt, item.createdAt);
    assert.ok(Date.parse(again.updatedAt) >= Date.parse(item.updatedAt) && again.updatedAt !== item.updatedAt);

    assert.equal(await store.getItem(ns, "nope"), null);
    assert.equal(await store.getItem([...home, "never-written"], "tip"), null);

    assert.equal(await store.deleteItem(ns, "tip"), undefined);
    assert.equal(await store.getItem(ns, "tip"), null);
    assert.equal(await store.deleteItem(ns, "tip"), undefined); // idempotent, as LangGraph's
  });

  it("searchItems with filter, query, limit and offset", async () => {
    const { store, home } = await user();
    const ns = [...home, "kb"];
    await store.putItem(ns, "py", { text: "Python uses indentation for blocks", lang: "en", stars: 5,
                                    meta: { topic: "code", level: 1 } });
    await store.putItem(ns, "rust", { text: "Rust has a borrow checker", lang: "en", stars: 3,
                                      meta: { topic: "code", level: 2 } });
    await store.putItem(ns, "bread", { text: "Sourdough needs a starter", lang: "fr", stars: 4,
                                       meta: { topic: "food", level: 1 } });
    const keys = (r: { items: Item[] }) => r.items.map((i) => i.key);

    const byFilter = await store.searchItems(home, { filter: { lang: "en" } });
    assert.deepEqual(keys(byFilter).sort(), ["py", "rust"]);
    for (const i of byFilter.items) {
      assert.deepEqual(i.namespace, ns);
      assert.ok(Date.parse(i.createdAt) > 0 && Date.parse(i.updatedAt) > 0);
      assert.equal(i.score, null); // no query: null on the wire (the SDK's type says `score?: number`)
    }
    assert.deepEqual(keys(await store.searchItems(home, { filter: { stars: { $gte: 4 }, lang: "en" } })), ["py"]);
    assert.deepEqual(keys(await store.searchItems(home, { filter: { meta: { topic: "code", level: 1 } } })), ["py"]);
    assert.equal((await store.searchItems(home, { limit: 2 })).items.length, 2);
    assert.equal((await store.searchItems(home, { limit: 2, offset: 2 })).items.length, 1);

    // Searchable as soon as putItem answered; scores ranked, highest first.
    const ranked = await store.searchItems(home, { query: "whitespace-sensitive syntax in programming languages" });
    assert.equal(ranked.items[0]?.key, "py");
    const scores = ranked.items.map((i) => i.score);
    assert.ok(scores.every((s) => typeof s === "number"), JSON.stringify(scores));
    assert.deepEqual(scores, [...scores].sort((a, b) => b! - a!));
    assert.deepEqual(keys(await store.searchItems(home, { query: "baking bread", filter: { lang: "fr" } })), ["bread"]);
    // A blank query is no query, as in LangGraph's stores.
    assert.ok((await store.searchItems(home, { query: " " })).items.every((i) => i.score === null));
  });

  it("putItem's index: false and index paths", async () => {
    const { store, home } = await user();
    const ns = [...home, "idx"];
    await store.putItem(ns, "hidden", { text: "the violin concerto in D major" }, { index: false });
    await store.putItem(ns, "title", { title: "violin sonatas", body: "about gardening" }, { index: ["title"] });
    const found = (await store.searchItems(ns, { query: "violin concerto" })).items.map((i) => i.key);
    assert.ok(!found.includes("hidden") && found.includes("title"), JSON.stringify(found));
    // Not indexed is still stored and filterable.
    const filtered = await store.searchItems(ns, { filter: { text: "the violin concerto in D major" } });
    assert.deepEqual(filtered.items.map((i) => i.key), ["hidden"]);
  });

  it("listNamespaces with prefix, suffix, maxDepth, limit and offset", async () => {
    const { store, home } = await user();
    for (const sub of [["a", "x"], ["a", "y"], ["b", "x"]]) await store.putItem([...home, ...sub], "k", { v: "1" });
    const list = async (options: Parameters<StoreClient["listNamespaces"]>[0]) =>
      (await store.listNamespaces(options)).namespaces;

    assert.deepEqual(await list({ prefix: home }), [[...home, "a", "x"], [...home, "a", "y"], [...home, "b", "x"]]);
    assert.deepEqual(await list({ prefix: [...home, "a"] }), [[...home, "a", "x"], [...home, "a", "y"]]);
    assert.deepEqual(await list({ prefix: home, suffix: ["x"] }), [[...home, "a", "x"], [...home, "b", "x"]]);
    assert.deepEqual(await list({ prefix: ["user", "*", "b"] }), [[...home, "b", "x"]]);
    assert.deepEqual(await list({ prefix: home, maxDepth: 3 }), [[...home, "a"], [...home, "b"]]);
    assert.deepEqual(await list({ prefix: home, maxDepth: 2 }), [home]);
    assert.deepEqual(await list({ prefix: home, limit: 1, offset: 1 }), [[...home, "a", "y"]]);
    assert.deepEqual(await list({}), [[...home, "a", "x"], [...home, "a", "y"], [...home, "b", "x"]]);
  });

  it("TTL is in minutes, and reads refresh it unless refreshTtl: false", async () => {
    const { store, memsvc, home } = await user();
    const ns = [...home, "ttl"];
    await store.putItem(ns, "one", { v: "1" }, { ttl: 1 });
    await store.putItem(ns, "half", { v: "1" }, { ttl: 0.5 });
    await store.putItem(ns, "never", { v: "1" }, { ttl: null });
    const ours = async (key: string) => memsvc.get(ns, key, { refreshTtl: false });

    const one = await ours("one");
    assert.equal(seconds(one.expires_at!, one.updated_at), 60);
    const half = await ours("half");
    assert.equal(seconds(half.expires_at!, half.updated_at), 30);
    assert.equal((await ours("never")).expires_at, null);

    await store.getItem(ns, "one", { refreshTtl: false });
    await store.searchItems(ns, { refreshTtl: false });
    assert.equal((await ours("one")).expires_at, one.expires_at); // no refresh asked: unchanged
    await store.getItem(ns, "one"); // LangGraph's default: refresh on read
    assert.ok(Date.parse((await ours("one")).expires_at!) >= Date.parse(one.expires_at!));
    await store.searchItems(ns, { filter: { v: "1" } });
    assert.ok(Date.parse((await ours("half")).expires_at!) >= Date.parse(half.expires_at!));
  });

  it("isolation: bob gets a 403 on alice's namespace; another tenant sees nothing", async () => {
    const alice = await user();
    const bob = await user();
    const ns = [...alice.home, "secret"];
    await alice.store.putItem(ns, "pin", { text: "1234" });

    const denied = await refusal(bob.store.getItem(ns, "pin"));
    assert.equal(denied.status, 403);
    assert.equal(denied.body.error.code, "FORBIDDEN");
    assert.deepEqual(Object.keys(denied.body.error).sort(), ["code", "details", "message", "retryable"]);
    for (const call of [
      () => bob.store.putItem(ns, "pin", { text: "0000" }),
      () => bob.store.deleteItem(ns, "pin"),
      () => bob.store.searchItems(alice.home),
      () => bob.store.listNamespaces({ prefix: alice.home }),
    ]) {
      assert.equal((await refusal(call())).status, 403);
    }
    assert.deepEqual((await bob.store.searchItems([], { filter: { text: "1234" } })).items, []);
    assert.ok(!(await bob.store.listNamespaces()).namespaces.some((n) => n.join("/") === ns.join("/")));

    const stranger = await user(alice.sub, `other-${process.pid}`); // alice's name in another tenant
    assert.equal(await stranger.store.getItem(ns, "pin"), null);
    assert.deepEqual((await stranger.store.searchItems(alice.home)).items, []);
    assert.deepEqual((await stranger.store.listNamespaces({ prefix: alice.home })).namespaces, []);

    assert.deepEqual((await alice.store.getItem(ns, "pin"))?.value, { text: "1234" }); // untouched
  });

  it("bad input is a 400 with memsvc's envelope, and without a token a 401", async () => {
    const { store, home } = await user();
    const bad = await refusal(store.searchItems(home, { limit: 101 }));
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, "INVALID_ARGUMENT");
    assert.equal((bad.body.error.details as Record<string, unknown>).field, "limit");
    assert.equal((await refusal(store.putItem(home, "k", { v: 1 }, { ttl: 0 }))).status, 400);
    assert.equal((await refusal(store.listNamespaces({ maxDepth: 0 }))).status, 400);
    // The SDK itself refuses a label with '.' (its GET joins labels with '.'); memsvc refuses an empty one.
    await assert.rejects(store.putItem([...home, "a.b"], "k", { v: 1 }), /cannot contain periods/);
    assert.equal((await refusal(store.getItem([...home, ""], "k"))).status, 400);

    const anonymous = new Client({ apiUrl: server.url, apiKey: null }).store;
    const unauthorized = await refusal(anonymous.getItem(home, "k"));
    assert.equal(unauthorized.status, 401);
    assert.equal(unauthorized.body.error.code, "UNAUTHORIZED");
  });
});
