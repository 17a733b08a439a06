/** MemsvcClient: every route of the live server's OpenAPI document has a method; errors,
 * retries and encoding with a scripted fetch; and a tour of the routes against `memsvc serve`. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import {
  AuthError,
  ConflictError,
  InvalidArgumentError,
  MemsvcClient,
  MemsvcError,
  NotFoundError,
  PreconditionFailedError,
  TransientError,
  pathSegment,
} from "memsvc-client";
import { startServer, type LiveServer } from "./server.js";

type Method = (c: MemsvcClient) => Promise<unknown>;
const NS = ["user", "alice", "notes"];
const UUID = "0b5a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b";

/** Every (method, path) of the route table -> a call of the client that sends it. A route the
 * server gains fails `covers every route` until it is added here (and to the client). */
const ROUTES: Record<string, Method> = {
  "PUT /v1/memories": (c) => c.put(NS, "k", { text: "hi" }),
  "GET /v1/memories": (c) => c.get(NS, "k"),
  "DELETE /v1/memories": (c) => c.delete(NS, "k"),
  "POST /v1/memories/search": (c) => c.search(NS, { query: "hi" }),
  "POST /v1/memories/recall": (c) => c.recall("hi"),
  "POST /v1/memories/remember": (c) => c.remember("I like tea"),
  "POST /v1/memories/extract": (c) => c.extract([{ role: "user", content: "I like tea" }]),
  "POST /v1/memories/feedback": (c) => c.feedback(UUID, "useful"),
  "GET /v1/memories/namespaces": (c) => c.listNamespaces({ prefix: ["user"] }),
  "GET /v1/memories/events": (c) => c.events({ namespacePrefix: ["user"] }),
  "GET /v1/memories/history": (c) => c.history(NS, "k"),
  "GET /admin/v1/memories/policies": (c) => c.getPolicies(),
  "PUT /admin/v1/memories/policies": (c) => c.putPolicies({ "authz.rego": "package x" }),
  "GET /admin/v1/memories/index/status": (c) => c.indexStatus(),
  "POST /admin/v1/memories/index/trigger": (c) => c.indexTrigger(),
  "POST /admin/v1/memories/index/retry": (c) => c.indexRetry([UUID]),
  "GET /admin/v1/memories/settings": (c) => c.getSettings(),
  "PUT /admin/v1/memories/settings": (c) => c.putSettings({ max_depth: 10 }),
  "DELETE /admin/v1/memories/{id}": (c) => c.forceDelete(UUID),
  "POST /v1/memory/sessions": (c) => c.createSession("s1"),
  "GET /v1/memory/sessions": (c) => c.listSessions(),
  "GET /v1/memory/sessions/{id}": (c) => c.getSession("s1"),
  "PUT /v1/memory/sessions/{id}": (c) => c.updateSession("s1", { title: "t", ifMatch: 1 }),
  "DELETE /v1/memory/sessions/{id}": (c) => c.deleteSession("s1"),
  "POST /v1/memory/sessions/{id}/messages": (c) => c.addMessage("s1", "user", "hello"),
  "GET /v1/memory/sessions/{id}/messages": (c) => c.getMessages("s1"),
  "POST /v1/memory/sessions/{id}/close": (c) => c.closeSession("s1"),
  "POST /v1/memory/semantic": (c) => c.upsertSemantic("tea", { externalId: "e1" }),
  "GET /v1/memory/semantic": (c) => c.getSemantic({ externalId: "e1" }),
  "DELETE /v1/memory/semantic": (c) => c.deleteSemantic({ externalId: "e1" }),
  "POST /v1/memory/task-context": (c) => c.storeTaskContext("t1", "ev"),
  "GET /v1/memory/task-context/by-subtask/{subtask_id}": (c) => c.getTaskBySubtask("st1"),
  "GET /v1/memory/task-context/{task_id}": (c) => c.getTaskContext("t1"),
  "PUT /v1/memory/task-context/{task_id}": (c) => c.updateTaskContext("t1", { state: {} }),
  "DELETE /v1/memory/task-context/{task_id}": (c) => c.deleteTaskContext("t1"),
  "POST /v1/memory/task-context/{task_id}/sub-tasks": (c) => c.changeSubTasks("t1", { add: ["a"] }),
  "POST /v1/memory/plans": (c) => c.createPlan("p1", "goal"),
  "GET /v1/memory/plans": (c) => c.listPlans({ status: "active" }),
  "GET /v1/memory/plans/{plan_id}": (c) => c.getPlan("p1"),
  "PUT /v1/memory/plans/{plan_id}": (c) => c.updatePlan("p1", { status: "completed" }),
  "DELETE /v1/memory/plans/{plan_id}": (c) => c.deletePlan("p1"),
  "PUT /v1/memory/working/{plan_id}/{key}": (c) => c.setWorking("p1", "k", 1),
  "GET /v1/memory/working/{plan_id}/{key}": (c) => c.getWorking("p1", "k"),
  "DELETE /v1/memory/working/{plan_id}/{key}": (c) => c.deleteWorking("p1", "k"),
  "GET /v1/memory/working/{plan_id}": (c) => c.listWorking("p1"),
  "DELETE /v1/memory/working/{plan_id}": (c) => c.deleteAllWorking("p1"),
  "POST /v1/graph/entities/find": (c) => c.findEntities(["user"], ["Ada"]),
  "PUT /v1/graph/entities": (c) => c.putEntity(NS, "Ada", "PERSON"),
  "DELETE /v1/graph/entities": (c) => c.deleteEntity(NS, "Ada"),
  "PUT /v1/graph/relations": (c) => c.putRelation(NS, "Ada", "WORKS_ON", "Engine"),
  "DELETE /v1/graph/relations": (c) => c.deleteRelation(NS, "Ada", "WORKS_ON", "Engine"),
  "POST /v1/graph/related": (c) => c.related(["user"], "Ada"),
  "POST /v1/graph/path": (c) => c.path(["user"], "Ada", { namespace: NS, key: "k" }),
  "POST /v1/graph/neighbours": (c) => c.neighbours(["user"], "Ada", { direction: "out", relation: "WORKS_ON" }),
  "POST /admin/v1/graph/integrity-scan": (c) => c.graphIntegrityScan(),
  "POST /v1/memories/restore": (c) => c.restore(UUID),
  "GET /v1/memory/profile": (c) => c.profile({ tokenBudget: 200 }),
  "POST /admin/v1/memories/reflect": (c) => c.reflect("alice"),
  "DELETE /admin/v1/users/{user_id}": (c) => c.eraseUser("alice"),
  "GET /admin/v1/users/{user_id}/erasure": (c) => c.userErasure("alice"),
  "POST /admin/v1/exports": (c) => c.startExport({ encrypt: false }),
  "GET /admin/v1/exports/{id}": (c) => c.exportStatus(UUID),
  "GET /admin/v1/exports/{id}/parts": (c) => c.exportPart(UUID, 0),
  "POST /admin/v1/imports": (c) => c.createImport(),
  "PUT /admin/v1/imports/{id}/parts": (c) => c.putImportPart(UUID, 0, "AA=="),
  "POST /admin/v1/imports/{id}/start": (c) => c.startImport(UUID, 1),
  "GET /admin/v1/imports/{id}": (c) => c.importStatus(UUID),
  "PUT /store/items": (c) => c.storePutItem(NS, "k", { text: "hi" }, { ttl: 5 }),
  "GET /store/items": (c) => c.storeGetItem(NS, "k"),
  "DELETE /store/items": (c) => c.storeDeleteItem(NS, "k"),
  "POST /store/items/search": (c) => c.storeSearchItems(["user"], { query: "hi" }),
  "POST /store/namespaces": (c) => c.storeListNamespaces({ prefix: ["user"] }),
  "GET /v1/identity": (c) => c.identity(),
  "GET /health": (c) => c.health(),
  "GET /openapi.json": (c) => c.openapi(),
  "GET /metrics": (c) => c.metrics(),
};

interface Sent {
  method: string;
  url: URL;
  headers: Headers;
  body: string | undefined;
}

/** A fetch that records each request and answers from `script` (default: 200 `{}`). */
function scripted(script: Array<Response | Error> = []): { fetch: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const f = (async (input: string | URL | Request, init?: RequestInit) => {
    sent.push({
      method: init?.method ?? "GET",
      url: new URL(String(input)),
      headers: new Headers(init?.headers),
      body: init?.body as string | undefined,
    });
    const next = script.shift();
    if (next instanceof Error) throw next;
    return next ?? new Response("{}", { status: 200, headers: { "content-type": "application/json" } });
  }) as typeof fetch;
  return { fetch: f, sent };
}

function envelope(status: number, code: string, retryable: boolean, headers: Record<string, string> = {}, details = {}): Response {
  return new Response(JSON.stringify({ error: { code, message: `${code} happened`, retryable, details } }), {
    status,
    headers: { "content-type": "application/json", "x-request-id": "req-1", ...headers },
  });
}

function template(path: string): RegExp {
  return new RegExp("^" + path.replace(/[.]/g, "\\.").replace(/\{[^}]+\}/g, "[^/]+") + "$");
}

describe("MemsvcClient against a scripted fetch", () => {
  it("sends each mapped route as its method and path", async () => {
    for (const [route, call] of Object.entries(ROUTES)) {
      const { fetch, sent } = scripted();
      const client = new MemsvcClient({ url: "http://memsvc.test/stage", token: "t", fetch });
      await call(client);
      assert.equal(sent.length, 1, route);
      const [method, path] = route.split(" ");
      assert.equal(sent[0].method, method, route);
      assert.match(sent[0].url.pathname.replace(/^\/stage/, ""), template(path), route);
      assert.equal(sent[0].headers.get("authorization"), "Bearer t");
    }
  });

  it("turns the error envelope into typed errors", async () => {
    const cases: Array<[Response, new (...a: never[]) => MemsvcError, string]> = [
      [envelope(400, "INVALID_ARGUMENT", false, {}, { field: "key" }), InvalidArgumentError, "INVALID_ARGUMENT"],
      [envelope(413, "CONTENT_TOO_LONG", false, {}, { max_bytes: 10 }), InvalidArgumentError, "CONTENT_TOO_LONG"],
      [envelope(401, "UNAUTHORIZED", false), AuthError, "UNAUTHORIZED"],
      [envelope(403, "FORBIDDEN", false), AuthError, "FORBIDDEN"],
      [envelope(404, "NOT_FOUND", false), NotFoundError, "NOT_FOUND"],
      [envelope(409, "CONFLICT", false), ConflictError, "CONFLICT"],
      [envelope(412, "PRECONDITION_FAILED", false), PreconditionFailedError, "PRECONDITION_FAILED"],
      [envelope(500, "INTERNAL", false), MemsvcError, "INTERNAL"],
      [new Response(JSON.stringify({ message: "Forbidden" }), { status: 403 }), AuthError, "FORBIDDEN"],
    ];
    for (const [response, kind, code] of cases) {
      const { fetch } = scripted([response]);
      const client = new MemsvcClient({ url: "http://memsvc.test", token: "t", fetch, maxRetries: 0 });
      const error = await client.get(NS, "k").then(() => assert.fail("no error"), (e: unknown) => e);
      assert.ok(error instanceof kind, `${code}: ${String(error)}`);
      assert.ok(error instanceof MemsvcError);
      assert.equal(error.code, code);
      assert.equal(error.status, response.status);
      assert.equal(error.retryable, false);
    }
    const { fetch } = scripted([envelope(400, "INVALID_ARGUMENT", false, {}, { field: "key" })]);
    const error = (await new MemsvcClient({ url: "http://x", token: "t", fetch }).get(NS, "k").catch((e) => e)) as MemsvcError;
    assert.deepEqual(error.details, { field: "key" });
    assert.equal(error.requestId, "req-1");
    assert.equal(error.message, "INVALID_ARGUMENT happened");
    assert.deepEqual(error.envelope, { error: { code: "INVALID_ARGUMENT", message: "INVALID_ARGUMENT happened", retryable: false, details: { field: "key" } } });
  });

  it("retries what is retryable, honouring Retry-After, then succeeds", async () => {
    const waits: number[] = [];
    const { fetch, sent } = scripted([
      envelope(429, "RATE_LIMITED", true, { "retry-after": "7" }),
      envelope(503, "PROVIDER_ERROR", true),
      new TypeError("fetch failed"),
      new Response(JSON.stringify({ ok: 1 }), { status: 200 }),
    ]);
    const client = new MemsvcClient({
      url: "http://x", token: "t", fetch, maxRetries: 3, backoffMs: 100, maxBackoffMs: 1000,
      sleep: async (ms) => { waits.push(ms); }, random: () => 0.5,
    });
    assert.deepEqual(await client.getPlan("p"), { ok: 1 });
    assert.equal(sent.length, 4);
    // Retry-After: 7 s exactly; then jittered back-off in [ceiling/2, ceiling], ceiling = 100 * 2^attempt
    assert.deepEqual(waits, [7000, 150, 300]);
  });

  it("gives up after maxRetries, on a non-retryable error, or on a Retry-After past maxRetryAfterMs", async () => {
    const waits: number[] = [];
    const sleep = async (ms: number) => { waits.push(ms); };
    let s = scripted([envelope(503, "X", true), envelope(503, "X", true), envelope(503, "X", true)]);
    let client = new MemsvcClient({ url: "http://x", token: "t", fetch: s.fetch, maxRetries: 2, sleep, random: () => 0 });
    let error = await client.getPlan("p").catch((e) => e);
    assert.ok(error instanceof TransientError);
    assert.equal(s.sent.length, 3);
    assert.deepEqual(waits, [125, 250]);

    s = scripted([envelope(400, "INVALID_ARGUMENT", false)]);
    client = new MemsvcClient({ url: "http://x", token: "t", fetch: s.fetch, sleep });
    error = await client.getPlan("p").catch((e) => e);
    assert.ok(error instanceof InvalidArgumentError);
    assert.equal(s.sent.length, 1);

    s = scripted([envelope(409, "CONFLICT", true)]); // the envelope's flag makes any status retryable
    client = new MemsvcClient({ url: "http://x", token: "t", fetch: s.fetch, sleep, maxRetries: 1 });
    await client.getPlan("p");
    assert.equal(s.sent.length, 2);

    s = scripted([envelope(429, "RATE_LIMITED", true, { "retry-after": "3600" })]);
    client = new MemsvcClient({ url: "http://x", token: "t", fetch: s.fetch, sleep, maxRetryAfterMs: 60_000 });
    error = await client.getPlan("p").catch((e) => e);
    assert.equal(error.code, "RATE_LIMITED");
    assert.equal(error.retryAfter, 3600);
    assert.equal(s.sent.length, 1);

    s = scripted([new TypeError("fetch failed")]);
    client = new MemsvcClient({ url: "http://x", token: "t", fetch: s.fetch, sleep, maxRetries: 0 });
    error = await client.getPlan("p").catch((e) => e);
    assert.ok(error instanceof TransientError);
    assert.equal(error.code, "UNAVAILABLE");
    assert.equal(error.status, null);
  });

  it("jitters the back-off within [ceiling/2, ceiling], capped by maxBackoffMs", () => {
    for (const r of [0, 0.999]) {
      const c = new MemsvcClient({ url: "http://x", token: "t", backoffMs: 250, maxBackoffMs: 1000, maxRetries: 10, random: () => r });
      const e = new TransientError("X", "x", { retryable: true });
      const delays = [0, 1, 2, 3, 4].map((a) => c.transport.retryDelay(e, a)!);
      const ceilings = [250, 500, 1000, 1000, 1000];
      delays.forEach((d, i) => assert.ok(d >= ceilings[i] / 2 && d <= ceilings[i], `${d} for ${ceilings[i]}`));
    }
  });

  it("encodes namespaces, keys and ids exactly", async () => {
    const { fetch, sent } = scripted();
    const client = new MemsvcClient({ url: "http://x/", token: () => "fresh", fetch, tenantId: "acme" });
    await client.get(["user", "a b", "x/y&z=1"], "k+é*");
    await client.getWorking("../p", "a/b");
    assert.equal(sent[0].url.search, "?ns=user&ns=a%20b&ns=x%2Fy%26z%3D1&key=k%2B%C3%A9%2A");
    assert.equal(sent[1].url.pathname, "/v1/memory/working/%2E%2E%2Fp/a%2Fb");
    assert.equal(sent[0].headers.get("x-tenant-id"), "acme");
    assert.equal(sent[0].headers.get("authorization"), "Bearer fresh");
    assert.equal(pathSegment("a.b"), "a%2Eb");
  });

  it("sends If-Match and leaves absent fields out of bodies", async () => {
    const { fetch, sent } = scripted();
    const client = new MemsvcClient({ url: "http://x", token: "t", fetch });
    await client.updatePlan("p", { status: "completed", ifMatch: 3 });
    assert.equal(sent[0].headers.get("if-match"), "3");
    assert.deepEqual(JSON.parse(sent[0].body!), { status: "completed" });
    await client.put(["user", "a"], "k", { v: 1 }, { indexFields: false, ttlSeconds: 5 });
    assert.deepEqual(JSON.parse(sent[1].body!), { namespace: ["user", "a"], key: "k", value: { v: 1 }, ttl_seconds: 5, index_fields: false });
  });
});

describe("MemsvcClient against memsvc serve", () => {
  let server: LiveServer;
  let alice: MemsvcClient;
  let admin: MemsvcClient;

  before(async () => {
    server = await startServer();
    alice = new MemsvcClient({ url: server.url, token: await server.token({ sub: "alice" }) });
    admin = new MemsvcClient({ url: server.url, token: await server.token({ sub: "root", roles: ["admin"] }) });
  });
  after(async () => server?.stop());

  it("covers every route of the route table (GET /openapi.json)", async () => {
    const doc = await alice.openapi();
    const live: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(ops)) {
        if (["get", "put", "post", "delete", "patch"].includes(method)) live.push(`${method.toUpperCase()} ${path}`);
      }
    }
    assert.ok(live.length >= 60, `only ${live.length} routes in the document`);
    const missing = live.filter((r) => !(r in ROUTES));
    assert.deepEqual(missing, [], `routes without a client method: add them to MemsvcClient and to ROUTES`);
    const stale = Object.keys(ROUTES).filter((r) => !live.includes(r));
    assert.deepEqual(stale, [], "ROUTES names routes the server no longer has");
  });

  it("puts, gets, searches, lists and deletes items", async () => {
    const ns = ["user", "alice", "prefs"];
    const put = await alice.put(ns, "drink", { text: "Alice drinks green tea every morning" }, { syncIndex: true });
    assert.equal(put.key, "drink");
    assert.equal(put.version, 1);
    const item = await alice.get(ns, "drink");
    assert.deepEqual(item.value, { text: "Alice drinks green tea every morning" });
    const found = await alice.search(["user", "alice"], { query: "what does alice drink", limit: 5 });
    assert.equal(found.items[0].key, "drink");
    assert.ok(typeof found.items[0].score === "number");
    const { namespaces } = await alice.listNamespaces({ prefix: ["user", "alice"] });
    assert.deepEqual(namespaces, [ns]);
    const events = await alice.events({ namespacePrefix: ["user", "alice"] });
    assert.ok(Array.isArray(events.events) && "after_cursor" in events); // the timeline is written off the request path
    await alice.delete(ns, "drink");
    await alice.delete(ns, "drink"); // idempotent
    await assert.rejects(alice.get(ns, "drink"), NotFoundError);
  });

  it("says who the caller is (GET /v1/identity), each tenant's token its own", async () => {
    const me = await alice.identity();
    assert.deepEqual({ tenant: me.tenant_id, user: me.user_id, roles: me.roles, auth: me.auth },
      { tenant: "default", user: "alice", roles: [], auth: "jwt" });
    assert.equal(me.claims.sub, "alice");
    assert.deepEqual((await admin.identity()).roles, ["admin"]);
    const other = new MemsvcClient({ url: server.url, token: await server.token({ sub: "alice", tenant: "globex" }) });
    const theirs = await other.identity();
    assert.deepEqual([theirs.tenant_id, theirs.user_id], ["globex", "alice"]);
  });

  it("counts namespaces, explains a recall and checks a policy bundle without storing it", async () => {
    const ns = ["user", "alice", "counted"];
    await alice.put(ns, "a", { text: "Alice counts sheep" }, { syncIndex: true });
    await alice.put([...ns, "deeper"], "b", { text: "Alice counts stars" }, { syncIndex: true });
    const listed = await alice.listNamespaces({ prefix: ns, counts: true });
    assert.deepEqual(listed, { namespaces: [ns, [...ns, "deeper"]], counts: [2, 1], count_cap: 1000 });
    const recalled = await alice.recall("what does alice count", { namespace_prefix: ns, min_score: 0, explain: true });
    const first = recalled.memories[0];
    assert.equal(first.explain?.relevance, first.relevance);
    assert.ok(Array.isArray(recalled.metadata.cut));
    const bundle = (await admin.getPolicies()) as { version: string; policies: Record<string, string> };
    const { policies } = bundle;
    assert.deepEqual(await admin.putPolicies(policies, { dryRun: true }), { valid: true });
    await assert.rejects(admin.putPolicies({ ...policies, "authz.rego": "package memories.authz\n\nallow if {\n" }, { dryRun: true }),
      (err: unknown) => err instanceof InvalidArgumentError && (err.details as Record<string, unknown>).policy_file === "authz.rego");
    const edited = { ...policies, "authz.rego": policies["authz.rego"] + "\n# edited\n" };
    const landed = (await admin.putPolicies(edited, { replacing: bundle.version })) as { version: string };
    await assert.rejects(admin.putPolicies(policies, { replacing: bundle.version }),
      (err: unknown) => err instanceof PreconditionFailedError && (err.details as Record<string, unknown>).current_version === landed.version);
    const restored = (await admin.putPolicies(policies, { replacing: landed.version })) as { version: string };
    assert.equal(restored.version, bundle.version);
    await alice.delete(ns, "a");
    await alice.delete([...ns, "deeper"], "b");
  });

  it("speaks the LangGraph Platform store API (/store/...)", async () => {
    const ns = ["user", "alice", "platform"];
    await alice.storePutItem(ns, "k", { text: "Alice plays the cello on Sundays" }, { ttl: 10 });
    const item = await alice.storeGetItem(ns, "k");
    assert.deepEqual(item?.value, { text: "Alice plays the cello on Sundays" });
    assert.deepEqual(item?.namespace, ns);
    const { items } = await alice.storeSearchItems(["user", "alice"], { filter: { text: "Alice plays the cello on Sundays" } });
    assert.deepEqual(items.map((i) => i.key), ["k"]);
    const { namespaces } = await alice.storeListNamespaces({ prefix: ["user", "alice"] });
    assert.ok(namespaces.some((n) => n.join("/") === ns.join("/")));
    await alice.storeDeleteItem(ns, "k");
    assert.equal(await alice.storeGetItem(ns, "k"), null);
  });

  it("raises the live error envelope as typed errors", async () => {
    const forbidden = await alice.put(["user", "bob"], "k", { v: 1 }).catch((e) => e);
    assert.ok(forbidden instanceof AuthError);
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.code, "FORBIDDEN");
    assert.ok(forbidden.requestId);
    assert.equal(forbidden.envelope?.error.code, "FORBIDDEN");
    const invalid = await alice.put([], "k", { v: 1 }).catch((e) => e);
    assert.ok(invalid instanceof InvalidArgumentError);
    assert.equal(invalid.retryable, false);
    const anonymous = new MemsvcClient({ url: server.url, token: "not-a-jwt" });
    const unauthorized = await anonymous.get(["user", "alice"], "k").catch((e) => e);
    assert.ok(unauthorized instanceof AuthError);
    assert.equal(unauthorized.status, 401);
  });

  it("remembers and recalls typed memories", async () => {
    const remembered = await alice.remember("I prefer window seats on long flights", { type: "preference" });
    assert.equal(remembered.action, "created");
    const again = await alice.remember("I prefer window seats on long flights", { type: "preference" });
    assert.equal(again.action, "unchanged");
    const recalled = await alice.recall("seat preference on flights");
    assert.ok(recalled.memories.some((m) => m.content.includes("window seats")));
    assert.equal(typeof recalled.metadata.token_count, "number");
  });

  it("keeps workflow state: task contexts, plans, working memory, sessions", async () => {
    await alice.storeTaskContext("t/1", "build", { subTasks: ["a", "b"] });
    await assert.rejects(alice.storeTaskContext("t/1", "build"), ConflictError);
    assert.equal((await alice.getTaskBySubtask("a")).task_id, "t/1");
    const changed = await alice.changeSubTasks("t/1", { remove: ["a", "b"] });
    assert.equal(changed.remaining, 0);
    const tc = await alice.getTaskContext("t/1");
    await assert.rejects(alice.updateTaskContext("t/1", { state: { x: 1 }, ifMatch: tc.version + 5 }), PreconditionFailedError);
    await alice.deleteTaskContext("t/1");

    const plan = await alice.createPlan("p.1", "goal");
    assert.equal(plan.status, "running");
    assert.equal((await alice.listPlans({ status: "active" })).count, 1);
    assert.equal((await alice.updatePlan("p.1", { status: "completed", ifMatch: plan.version })).status, "completed");
    await alice.setWorking("p.1", "a/b", { n: 0 });
    assert.equal((await alice.setWorking("p.1", "a/b", { n: 1 }, { ifMatch: 1 })).version, 2);
    await assert.rejects(alice.setWorking("p.1", "a/b", { n: 9 }, { ifMatch: 1 }), PreconditionFailedError);
    assert.deepEqual((await alice.getWorking("p.1", "a/b")).value, { n: 1 });
    assert.equal((await alice.listWorking("p.1")).items.length, 1);
    await alice.deleteWorking("p.1", "a/b");
    await assert.rejects(alice.deleteWorking("p.1", "a/b"), NotFoundError);
    await alice.deletePlan("p.1");

    await alice.createSession("s 1", { title: "chat" });
    const m = await alice.addMessages("s 1", [{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }]);
    assert.deepEqual(m.map((x) => x.seq), [1, 2]);
    assert.equal((await alice.getMessages("s 1")).messages.length, 2);
    const closed = await alice.closeSession("s 1");
    assert.equal(typeof closed.promoted, "number");
    await alice.deleteSession("s 1");
  });

  it("answers the public and admin routes", async () => {
    assert.equal((await alice.health()).status, "healthy");
    assert.match(await alice.metrics(), /memory_operations|# (HELP|TYPE)/);
    const settings = await admin.getSettings();
    assert.equal(typeof settings.max_depth, "number");
    assert.equal(typeof (await admin.indexStatus()).pending, "number");
    assert.ok("processed" in (await admin.indexTrigger()));
    await assert.rejects(alice.getSettings(), AuthError);
  });

  it("runs the README's quick start (examples/quickstart.mjs)", async () => {
    const example = resolve(dirname(fileURLToPath(import.meta.url)), "../../examples/quickstart.mjs");
    const env = { ...process.env, MEMORY_SERVICE_URL: server.url, MEMORY_SERVICE_TOKEN: await server.token({ sub: "alice", tenant: "quickstart" }) };
    const { stdout } = await promisify(execFile)(process.execPath, [example], { env });
    assert.match(stdout, /^created -> \[ 'I prefer window seats on long flights' \]$/m);
    assert.match(stdout, /^tea Alice drinks green tea every morning 0\.\d\d$/m);
    assert.match(stdout, /^NOT_FOUND 404 [0-9a-f-]{36}$/m);
  });
});
