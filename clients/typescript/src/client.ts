/**
 * `MemsvcClient`: every route of API.md and API-AGENT.md (and what later issues added to the
 * route table) as typed methods. Each method builds one request and hands it to the `Transport`
 * (authentication, retries, typed errors). Methods answer the service's JSON (`undefined` for a
 * 204); `ifMatch: version` sends `If-Match`.
 */

import { Transport, pathSegment, type Call, type QueryParams, type TransportOptions } from "./http.js";
import type * as T from "./types.js";

type Json = T.JsonObject;

function nsKey(namespace: readonly string[], key: string): Array<[string, string]> {
  return [...namespace.map((s): [string, string] => ["ns", s]), ["key", key]];
}

/** The given query parameters, in order (undefined and null left out). */
function given(params: Record<string, string | number | boolean | null | undefined>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== null) out.push([name, String(value)]);
  return out;
}

/** The fields that were given: one left undefined is absent from the body, never null. */
function body<B extends Record<string, unknown>>(fields: B): Partial<B> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) out[name] = value;
  return out as Partial<B>;
}

function ifMatch(version: number | undefined): Record<string, string> | undefined {
  return version === undefined ? undefined : { "if-match": String(version) };
}

function session(id: string, rest = ""): string {
  return `/v1/memory/sessions/${pathSegment(id)}${rest}`;
}

const TC = "/v1/memory/task-context";

function endpoint(end: T.GraphEndpoint): Json {
  return typeof end === "string" ? { entity: end } : { memory: { namespace: [...end.namespace], key: end.key } };
}

export type MemsvcClientOptions = TransportOptions;

export class MemsvcClient {
  readonly transport: Transport;

  constructor(options: MemsvcClientOptions | Transport = {}) {
    this.transport = options instanceof Transport ? options : new Transport(options);
  }

  /** Send any request (for a route this client does not know yet). */
  request<R = unknown>(call: Call): Promise<R> {
    return this.transport.request<R>(call);
  }

  private run<R>(method: Call["method"], path: string, query?: QueryParams, b?: unknown, headers?: Record<string, string>): Promise<R> {
    return this.transport.request<R>({ method, path, query, body: b, headers });
  }

  // -- items (API.md) --

  /** `PUT /v1/memories`: upsert; `{id, version, ...}` without the value. */
  put(namespace: readonly string[], key: string, value: Json, options: T.PutOptions = {}): Promise<T.PutMemoryResult> {
    return this.run("PUT", "/v1/memories", undefined, body({
      namespace: [...namespace], key, value,
      attributes: options.attributes, ttl_seconds: options.ttlSeconds,
      index_fields: options.indexFields === false ? false : options.indexFields ? [...options.indexFields] : undefined,
      sync_index: options.syncIndex,
    }));
  }

  /** `GET /v1/memories`: the item; `NotFoundError` when there is none. */
  get(namespace: readonly string[], key: string, options: { refreshTtl?: boolean } = {}): Promise<T.MemoryItem> {
    return this.run("GET", "/v1/memories", [...nsKey(namespace, key), ...given({ refresh_ttl: options.refreshTtl })]);
  }

  /** `DELETE /v1/memories`: idempotent. */
  delete(namespace: readonly string[], key: string): Promise<void> {
    return this.run("DELETE", "/v1/memories", nsKey(namespace, key));
  }

  /** `POST /v1/memories/search`: `{items}`; filter only, or ranked by `query` (hybrid by default). */
  search(namespacePrefix: readonly string[], options: T.SearchOptions = {}): Promise<T.SearchResult> {
    return this.run("POST", "/v1/memories/search", undefined, body({
      namespace_prefix: [...namespacePrefix], query: options.query, filter: options.filter,
      limit: options.limit, offset: options.offset, mode: options.mode, min_score: options.minScore,
      refresh_ttl: options.refreshTtl, as_of: options.asOf, known_at: options.knownAt, temporal: options.temporal,
    }));
  }

  /** `GET /v1/memories/namespaces`: `{namespaces}`; `*` in `prefix`/`suffix` matches one segment;
   * with `counts`, also `counts` and `count_cap`. */
  listNamespaces(options: T.ListNamespacesOptions = {}): Promise<T.NamespacesResult> {
    const query: Array<[string, string]> = [
      ...(options.prefix ?? []).map((p): [string, string] => ["prefix", p]),
      ...(options.suffix ?? []).map((p): [string, string] => ["suffix", p]),
      ...given({ max_depth: options.maxDepth, limit: options.limit, offset: options.offset, counts: options.counts || undefined }),
    ];
    return this.run("GET", "/v1/memories/namespaces", query);
  }

  /** `GET /v1/identity`: who the service takes the caller to be. */
  identity(): Promise<T.IdentityResult> {
    return this.run("GET", "/v1/identity");
  }

  /** `GET /v1/memories/events`: the timeline, oldest first; follow `after_cursor` until null. */
  events(options: T.EventsOptions = {}): Promise<T.EventsResult> {
    const query: Array<[string, string]> = [
      ...(options.namespacePrefix ?? []).map((p): [string, string] => ["ns", p]),
      ...(options.kinds ?? []).map((k): [string, string] => ["kinds", k]),
      ...given({ after: options.after, before: options.before, after_cursor: options.afterCursor, limit: options.limit }),
    ];
    return this.run("GET", "/v1/memories/events", query);
  }

  /** `GET /v1/memories/history`: every version of one memory, newest first. */
  history(namespace: readonly string[], key: string, options: { limit?: number; cursor?: string } = {}): Promise<Json> {
    return this.run("GET", "/v1/memories/history", [...nsKey(namespace, key), ...given(options)]);
  }

  // -- typed memories (API-AGENT.md) --

  /** `POST /v1/memories/remember`: `{action, memory, neighbors, judge}`, or `{candidate_id}` with `wait: false`. */
  remember(content: string, fields: T.RememberFields = {}): Promise<T.RememberResult> {
    return this.run("POST", "/v1/memories/remember", undefined, body({ content, ...fields }));
  }

  /** `POST /v1/memories/recall`: `{memories, metadata}`. */
  recall(query: string, fields: T.RecallFields = {}): Promise<T.RecallResult> {
    return this.run("POST", "/v1/memories/recall", undefined, body({ query, ...fields }));
  }

  /** `POST /v1/memories/extract`: learn typed memories from a conversation (oldest message first). */
  extract(messages: readonly T.ExtractMessage[], options: { layer?: string; identifiers?: T.Identifiers; wait?: boolean } = {}): Promise<Json> {
    return this.run("POST", "/v1/memories/extract", undefined, body({ messages: [...messages], ...options }));
  }

  /** `POST /v1/memories/feedback`: `useful` raises importance; `wrong`/`outdated` supersede. */
  feedback(memoryId: string, signal: "useful" | "wrong" | "outdated", options: { note?: string } = {}): Promise<Json> {
    return this.run("POST", "/v1/memories/feedback", undefined, body({ id: memoryId, signal, note: options.note }));
  }

  /** `POST /v1/memories/restore`: bring an archived memory back. */
  restore(memoryId: string): Promise<Json> {
    return this.run("POST", "/v1/memories/restore", undefined, { id: memoryId });
  }

  /** `GET /v1/memory/profile`: the caller's standing profile within `tokenBudget` tokens. */
  profile(options: { tokenBudget?: number } = {}): Promise<Json> {
    return this.run("GET", "/v1/memory/profile", given({ token_budget: options.tokenBudget }));
  }

  // -- conversations --

  createSession(sessionId: string, options: { agentId?: string; title?: string; metadata?: Json; extract?: T.ExtractMode } = {}): Promise<Json> {
    return this.run("POST", "/v1/memory/sessions", undefined, body({
      session_id: sessionId, agent_id: options.agentId, title: options.title, metadata: options.metadata ?? {}, extract: options.extract,
    }));
  }

  listSessions(options: { limit?: number; cursor?: string; agentId?: string } = {}): Promise<Json> {
    return this.run("GET", "/v1/memory/sessions", given({ limit: options.limit, cursor: options.cursor, agent_id: options.agentId }));
  }

  getSession(sessionId: string): Promise<Json> {
    return this.run("GET", session(sessionId));
  }

  updateSession(sessionId: string, options: { title?: string; metadata?: Json; lastInteraction?: string; extract?: T.ExtractMode; ifMatch?: number } = {}): Promise<Json> {
    return this.run("PUT", session(sessionId), undefined, body({
      title: options.title, metadata: options.metadata, last_interaction: options.lastInteraction, extract: options.extract,
    }), ifMatch(options.ifMatch));
  }

  deleteSession(sessionId: string): Promise<void> {
    return this.run("DELETE", session(sessionId));
  }

  addMessage(sessionId: string, role: T.MessageRole, content: string, options: { correlationId?: string; name?: string } = {}): Promise<T.AppendedMessage> {
    return this.run("POST", session(sessionId, "/messages"), undefined, body({
      role, content, correlation_id: options.correlationId, name: options.name,
    }));
  }

  /** Append `messages` in order, one request each (the service has no batch route). Not
   * idempotent: a retry after a lost answer may store a message twice. */
  async addMessages(sessionId: string, messages: readonly T.ExtractMessage[]): Promise<T.AppendedMessage[]> {
    const out: T.AppendedMessage[] = [];
    for (const m of messages) out.push(await this.addMessage(sessionId, m.role, m.content, { name: m.name }));
    return out;
  }

  getMessages(sessionId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<Json> {
    return this.run("GET", session(sessionId, "/messages"), given({ after_seq: options.afterSeq, limit: options.limit }));
  }

  closeSession(sessionId: string): Promise<Json> {
    return this.run("POST", session(sessionId, "/close"));
  }

  upsertSemantic(content: string, options: { externalId?: string; metadata?: Json } = {}): Promise<Json> {
    return this.run("POST", "/v1/memory/semantic", undefined, body({
      content, external_id: options.externalId, metadata: options.metadata ?? {},
    }));
  }

  getSemantic(ref: { externalId?: string; contentHash?: string }): Promise<Json> {
    return this.run("GET", "/v1/memory/semantic", given({ external_id: ref.externalId, content_hash: ref.contentHash }));
  }

  deleteSemantic(ref: { externalId?: string; contentHash?: string }): Promise<void> {
    return this.run("DELETE", "/v1/memory/semantic", given({ external_id: ref.externalId, content_hash: ref.contentHash }));
  }

  // -- workflow state (seed 003): task contexts, plans, working memory --

  /** `POST /v1/memory/task-context` -> `{task_id, created_at, version}`; `ConflictError` if it exists. */
  storeTaskContext(taskId: string, eventType: string, options: T.TaskContextFields = {}): Promise<Json> {
    return this.run("POST", TC, undefined, body({
      task_id: taskId, event_type: eventType, plan_id: options.planId, response_event: options.responseEvent,
      response_topic: options.responseTopic ?? "action-results", data: options.data ?? {},
      sub_tasks: [...(options.subTasks ?? [])], state: options.state ?? {},
    }));
  }

  getTaskContext(taskId: string): Promise<Json> {
    return this.run("GET", `${TC}/${pathSegment(taskId)}`);
  }

  /** The task context whose `sub_tasks` holds `subtaskId` (`NotFoundError` when none; `AuthError`
   * when it is another user's and the caller is neither `service` nor `admin`). */
  getTaskBySubtask(subtaskId: string): Promise<Json> {
    return this.run("GET", `${TC}/by-subtask/${pathSegment(subtaskId)}`);
  }

  /** `PUT`: only the fields given change; `ifMatch`: the version it must still be at. */
  updateTaskContext(taskId: string, fields: T.TaskContextFields & { ifMatch?: number }): Promise<Json> {
    return this.run("PUT", `${TC}/${pathSegment(taskId)}`, undefined, body({
      sub_tasks: fields.subTasks ? [...fields.subTasks] : undefined, state: fields.state, data: fields.data,
      plan_id: fields.planId, response_event: fields.responseEvent, response_topic: fields.responseTopic,
    }), ifMatch(fields.ifMatch));
  }

  /** Atomic: `{sub_tasks, remaining, removed, version}`. */
  changeSubTasks(taskId: string, change: { add?: readonly string[]; remove?: readonly string[] }): Promise<Json> {
    return this.run("POST", `${TC}/${pathSegment(taskId)}/sub-tasks`, undefined, {
      add: [...(change.add ?? [])], remove: [...(change.remove ?? [])],
    });
  }

  deleteTaskContext(taskId: string): Promise<void> {
    return this.run("DELETE", `${TC}/${pathSegment(taskId)}`);
  }

  createPlan(planId: string, goalEvent: string, options: { goalData?: Json; status?: T.PlanStatus; state?: Json } = {}): Promise<Json> {
    return this.run("POST", "/v1/memory/plans", undefined, {
      plan_id: planId, goal_event: goalEvent, goal_data: options.goalData ?? {}, status: options.status ?? "running", state: options.state ?? {},
    });
  }

  /** One page, newest first: `{plans, count, next_cursor}` (`status: "active"`: running). */
  listPlans(options: { status?: T.PlanStatus | "active"; limit?: number; cursor?: string } = {}): Promise<Json> {
    return this.run("GET", "/v1/memory/plans", given(options));
  }

  getPlan(planId: string): Promise<Json> {
    return this.run("GET", `/v1/memory/plans/${pathSegment(planId)}`);
  }

  updatePlan(planId: string, fields: { status?: T.PlanStatus; state?: Json; goalData?: Json; ifMatch?: number }): Promise<Json> {
    return this.run("PUT", `/v1/memory/plans/${pathSegment(planId)}`, undefined, body({
      status: fields.status, state: fields.state, goal_data: fields.goalData,
    }), ifMatch(fields.ifMatch));
  }

  /** Idempotent; the plan's working memory goes too. */
  deletePlan(planId: string): Promise<void> {
    return this.run("DELETE", `/v1/memory/plans/${pathSegment(planId)}`);
  }

  /** `ifMatch`: the version the key must still be at (412 otherwise). */
  setWorking(planId: string, key: string, value: unknown, options: { ttlSeconds?: number; ifMatch?: number } = {}): Promise<Json> {
    return this.run("PUT", `/v1/memory/working/${pathSegment(planId)}/${pathSegment(key)}`, undefined,
      body({ value, ttl_seconds: options.ttlSeconds }), ifMatch(options.ifMatch));
  }

  getWorking(planId: string, key: string): Promise<Json> {
    return this.run("GET", `/v1/memory/working/${pathSegment(planId)}/${pathSegment(key)}`);
  }

  /** One page in key order: `{items, next_cursor}`. */
  listWorking(planId: string, options: { limit?: number; cursor?: string } = {}): Promise<Json> {
    return this.run("GET", `/v1/memory/working/${pathSegment(planId)}`, given(options));
  }

  /** `NotFoundError` when the key is not there. */
  deleteWorking(planId: string, key: string): Promise<void> {
    return this.run("DELETE", `/v1/memory/working/${pathSegment(planId)}/${pathSegment(key)}`);
  }

  /** `{deleted_count, plan_id}`. */
  deleteAllWorking(planId: string): Promise<Json> {
    return this.run("DELETE", `/v1/memory/working/${pathSegment(planId)}`);
  }

  // -- knowledge graph --

  findEntities(namespacePrefix: readonly string[], names: readonly string[]): Promise<Json> {
    return this.run("POST", "/v1/graph/entities/find", undefined, { namespace_prefix: [...namespacePrefix], names: [...names] });
  }

  putEntity(namespace: readonly string[], name: string, type: T.EntityType = "CONCEPT"): Promise<Json> {
    return this.run("PUT", "/v1/graph/entities", undefined, { namespace: [...namespace], name, type });
  }

  deleteEntity(namespace: readonly string[], name: string): Promise<void> {
    return this.run("DELETE", "/v1/graph/entities", [...namespace.map((s): [string, string] => ["ns", s]), ["name", name]]);
  }

  putRelation(namespace: readonly string[], source: string, type: T.RelationType, target: string,
    options: { validFrom?: string; validTo?: string } = {}): Promise<Json> {
    return this.run("PUT", "/v1/graph/relations", undefined, body({
      namespace: [...namespace], source, type, target, valid_from: options.validFrom, valid_to: options.validTo,
    }));
  }

  deleteRelation(namespace: readonly string[], source: string, type: T.RelationType, target: string): Promise<void> {
    return this.run("DELETE", "/v1/graph/relations", [
      ...namespace.map((s): [string, string] => ["ns", s]), ["source", source], ["type", type], ["target", target],
    ]);
  }

  /** `POST /v1/graph/related`: memories related to an entity or a memory, nearest first. */
  related(namespacePrefix: readonly string[], from: T.GraphEndpoint, options: { maxHops?: number; limit?: number; asOf?: string } = {}): Promise<Json> {
    return this.run("POST", "/v1/graph/related", undefined, body({
      namespace_prefix: [...namespacePrefix], from: endpoint(from), max_hops: options.maxHops ?? 2, limit: options.limit ?? 20, as_of: options.asOf,
    }));
  }

  /** `POST /v1/graph/path`: the shortest path between two entities or memories. */
  path(namespacePrefix: readonly string[], from: T.GraphEndpoint, to: T.GraphEndpoint, options: { maxHops?: number; asOf?: string } = {}): Promise<Json> {
    return this.run("POST", "/v1/graph/path", undefined, body({
      namespace_prefix: [...namespacePrefix], from: endpoint(from), to: endpoint(to), max_hops: options.maxHops ?? 4, as_of: options.asOf,
    }));
  }

  /** `POST /v1/graph/neighbours`: a page of an entity's relations, each with the entity at its other end; pass `next_cursor` back as `cursor`. */
  neighbours(namespacePrefix: readonly string[], entity: T.GraphEndpoint, options: { direction?: "out" | "in" | "both"; relation?: T.RelationType; asOf?: string; limit?: number; cursor?: string } = {}): Promise<Json> {
    return this.run("POST", "/v1/graph/neighbours", undefined, body({
      namespace_prefix: [...namespacePrefix], entity: endpoint(entity), direction: options.direction ?? "both", relation: options.relation,
      as_of: options.asOf, limit: options.limit ?? 50, cursor: options.cursor,
    }));
  }

  // -- administration (roles admin/service) --

  getPolicies(): Promise<Json> {
    return this.run("GET", "/admin/v1/memories/policies");
  }

  /** The bundle now in force; with `dryRun`, only checked (`{valid: true}`, or an
   * `InvalidArgumentError` whose details name `policy_file`, `line` and `column`), nothing stored.
   * `replacing`: the `version` that `getPolicies` answered; a `PreconditionFailedError` (412) when
   * another bundle is in force by then. */
  putPolicies(policies: Record<string, string>, options: { dryRun?: boolean; replacing?: string } = {}): Promise<Json | T.PolicyCheckResult> {
    const body = options.replacing === undefined ? { policies } : { policies, version: options.replacing };
    return this.run("PUT", "/admin/v1/memories/policies", given({ dry_run: options.dryRun || undefined }), body);
  }

  getSettings(): Promise<Json> {
    return this.run("GET", "/admin/v1/memories/settings");
  }

  /** Only the settings given change. */
  putSettings(settings: Json): Promise<Json> {
    return this.run("PUT", "/admin/v1/memories/settings", undefined, settings);
  }

  indexStatus(): Promise<Json> {
    return this.run("GET", "/admin/v1/memories/index/status");
  }

  indexTrigger(): Promise<Json> {
    return this.run("POST", "/admin/v1/memories/index/trigger");
  }

  /** Send quarantined memories (`indexStatus().quarantined_items`) to the indexer again. */
  indexRetry(ids: readonly string[]): Promise<Json> {
    return this.run("POST", "/admin/v1/memories/index/retry", undefined, { ids: [...ids] });
  }

  forceDelete(memoryId: string): Promise<void> {
    return this.run("DELETE", `/admin/v1/memories/${pathSegment(memoryId)}`);
  }

  /** One bounded reflection run over the user's memories; call again while not `done`. */
  reflect(userId: string): Promise<Json> {
    return this.run("POST", "/admin/v1/memories/reflect", undefined, { user_id: userId });
  }

  graphIntegrityScan(): Promise<Json> {
    return this.run("POST", "/admin/v1/graph/integrity-scan");
  }

  /** Erase everything of one user of the tenant; a receipt with status `running` goes on when called again. */
  eraseUser(userId: string): Promise<Json> {
    return this.run("DELETE", `/admin/v1/users/${pathSegment(userId)}`);
  }

  userErasure(userId: string): Promise<Json> {
    return this.run("GET", `/admin/v1/users/${pathSegment(userId)}/erasure`);
  }

  /** Export the tenant, a namespace `prefix` or one user's layers (`userId`). */
  startExport(options: { prefix?: readonly string[]; userId?: string; passphrase?: string; kmsKeyId?: string; encrypt?: boolean } = {}): Promise<Json> {
    return this.run("POST", "/admin/v1/exports", undefined, body({
      scope: body({ prefix: options.prefix ? [...options.prefix] : undefined, user_id: options.userId }),
      encrypt: options.encrypt ?? true, passphrase: options.passphrase, kms_key_id: options.kmsKeyId,
    }));
  }

  exportStatus(jobId: string): Promise<Json> {
    return this.run("GET", `/admin/v1/exports/${pathSegment(jobId)}`);
  }

  /** `{index, parts, data}` (`data`: base64) of a finished export. */
  exportPart(jobId: string, index: number): Promise<Json> {
    return this.run("GET", `/admin/v1/exports/${pathSegment(jobId)}/parts`, [["index", String(index)]]);
  }

  createImport(options: { dryRun?: boolean; allowOtherTenant?: boolean } = {}): Promise<Json> {
    return this.run("POST", "/admin/v1/imports", undefined, { dry_run: options.dryRun ?? false, allow_other_tenant: options.allowOtherTenant ?? false });
  }

  /** Upload one part (`data`: base64 of at most 256 KiB). */
  putImportPart(jobId: string, index: number, dataBase64: string): Promise<void> {
    return this.run("PUT", `/admin/v1/imports/${pathSegment(jobId)}/parts`, undefined, { index, data: dataBase64 });
  }

  startImport(jobId: string, parts: number, options: { passphrase?: string } = {}): Promise<Json> {
    return this.run("POST", `/admin/v1/imports/${pathSegment(jobId)}/start`, undefined, body({ parts, passphrase: options.passphrase }));
  }

  importStatus(jobId: string): Promise<Json> {
    return this.run("GET", `/admin/v1/imports/${pathSegment(jobId)}`);
  }

  // -- the LangGraph Platform store API (/store/...: LangGraph's shapes; what its SDKs' StoreClient calls) --

  /** `PUT /store/items`: `ttl` in minutes; `index`: the paths to embed, or `false`. */
  storePutItem(namespace: readonly string[], key: string, value: Json, options: { index?: readonly string[] | false; ttl?: number } = {}): Promise<void> {
    return this.run("PUT", "/store/items", undefined, body({
      namespace: [...namespace], key, value, index: options.index === false ? false : options.index ? [...options.index] : undefined, ttl: options.ttl,
    }));
  }

  /** `GET /store/items`: the item (`{namespace, key, value, created_at, updated_at}`), or null. */
  storeGetItem(namespace: readonly string[], key: string, options: { refreshTtl?: boolean } = {}): Promise<T.StoreItem | null> {
    return this.run("GET", "/store/items", given({ namespace: namespace.join("."), key, refresh_ttl: options.refreshTtl }));
  }

  /** `DELETE /store/items` (idempotent). */
  storeDeleteItem(namespace: readonly string[], key: string): Promise<void> {
    return this.run("DELETE", "/store/items", undefined, { namespace: [...namespace], key });
  }

  /** `POST /store/items/search`: `{items}`, each with `score` when a query ranked them. */
  storeSearchItems(namespacePrefix: readonly string[], options: { filter?: Json; limit?: number; offset?: number; query?: string; refreshTtl?: boolean } = {}): Promise<{ items: T.StoreItem[] }> {
    return this.run("POST", "/store/items/search", undefined, body({
      namespace_prefix: [...namespacePrefix], filter: options.filter, limit: options.limit, offset: options.offset,
      query: options.query, refresh_ttl: options.refreshTtl,
    }));
  }

  /** `POST /store/namespaces`: `{namespaces}`. */
  storeListNamespaces(options: T.ListNamespacesOptions = {}): Promise<{ namespaces: string[][] }> {
    return this.run("POST", "/store/namespaces", undefined, body({
      prefix: options.prefix ? [...options.prefix] : undefined, suffix: options.suffix ? [...options.suffix] : undefined,
      max_depth: options.maxDepth, limit: options.limit, offset: options.offset,
    }));
  }

  // -- public routes --

  /** `GET /health` (also when unhealthy: the report, not an error). */
  health(): Promise<T.HealthReport> {
    return this.transport.request({ method: "GET", path: "/health", okStatuses: [503] });
  }

  /** `GET /openapi.json`: the OpenAPI document of the route table. */
  openapi(): Promise<Json> {
    return this.run("GET", "/openapi.json");
  }

  /** `GET /metrics`: Prometheus text (memsvc serve; `NotFoundError` on AWS, where metrics go to CloudWatch). */
  metrics(): Promise<string> {
    return this.transport.request({ method: "GET", path: "/metrics", as: "text" });
  }
}
