/**
 * `MemsvcStore`: LangGraph.js's `BaseStore` over the memsvc HTTP API, like the Python client's
 * `MemsvcStore` (clients/python/memsvc_client/store.py), whose mapping it follows:
 *
 *   import { MemsvcStore } from "memsvc-client/store";
 *   const store = new MemsvcStore({ url: "http://127.0.0.1:8000", token });
 *
 * `batch` is the only primitive; `get/put/delete/search/listNamespaces` build operations for it.
 * A batch runs like LangGraph's own stores: every read sees the state from before the batch's
 * writes, and several puts to one key leave the last one. Independent operations go out
 * concurrently (at most `maxConcurrency` requests in flight); only a put that a read of the same
 * batch could see waits for the reads.
 *
 * - namespace + key -> `ns=..&ns=..&key=..`; a put with `value: null` is `DELETE /v1/memories`.
 * - TTL: LangGraph's minutes -> `ttl_seconds` (rounded up, at least 1 s); `ttl.defaultTtl` for
 *   puts that name none (`ttl: null` means none), `refreshTtl` (default `ttl.refreshOnRead`,
 *   itself default true) -> `refresh_ttl` on get and search. The service sweeps expired items
 *   and never returns one; `sweepExpiredItems()` counts the ones this store saw expire.
 * - index: a put's `index` (or `index.fields` of the store) -> `index_fields` (`false`: none).
 *   The service embeds with its own model, so `dims` and `embeddings` are ignored.
 * - search: `query` (blank is no query) ranks (hybrid by default, `searchMode` to choose);
 *   `filter` -> the API's filter (nested objects become dot paths); limit/offset page through
 *   the API's 100-item pages.
 * - listNamespaces: several prefix/suffix conditions are merged into the API's one prefix and
 *   one suffix pattern (`*` matches one segment).
 */

import {
  BaseStore,
  InvalidNamespaceError,
  validateNamespace,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import { MemsvcClient } from "./client.js";
import { InvalidArgumentError, NotFoundError } from "./errors.js";
import type { TransportOptions } from "./http.js";
import type { JsonObject, MemoryItem, SearchMode } from "./types.js";

export { InvalidNamespaceError };

export const SEARCH_PAGE = 100; // the API's largest search `limit`
export const LIST_PAGE = 1000; // the API's largest list_namespaces `limit`

/** LangGraph's TTL configuration (as `PostgresStore` takes it). */
export interface TTLConfig {
  /** Minutes, for puts that name no TTL. */
  defaultTtl?: number;
  /** Whether reads refresh the TTL when they do not say (default true). */
  refreshOnRead?: boolean;
  /** Accepted and ignored: the service sweeps. */
  sweepIntervalMinutes?: number;
}

export interface MemsvcStoreOptions extends TransportOptions {
  /** Share an existing client (its transport: connections, authentication, retries) instead. */
  client?: MemsvcClient;
  ttl?: TTLConfig;
  /** LangGraph's IndexConfig; only `fields` is used (the default `index_fields` of a put). */
  index?: { fields?: string[]; dims?: number; embeddings?: unknown; [k: string]: unknown };
  /** Puts wait until the item is indexed (`sync_index`), so a search right after finds it. Default true. */
  readYourWrites?: boolean;
  /** The `mode` of searches with a query (default: the service's, hybrid). */
  searchMode?: SearchMode;
}

/** A put with a TTL in minutes (`null`: none; absent: the store's default). */
export interface MemsvcPutOperation extends PutOperation {
  ttl?: number | null;
}
export interface MemsvcGetOperation extends GetOperation {
  refreshTtl?: boolean;
}
export interface MemsvcSearchOperation extends SearchOperation {
  refreshTtl?: boolean;
}

type Op = Operation;

function isPut(op: Op): op is MemsvcPutOperation {
  return "value" in op;
}
function isGet(op: Op): op is MemsvcGetOperation {
  return "key" in op && "namespace" in op && !("value" in op);
}
function isSearch(op: Op): op is MemsvcSearchOperation {
  return "namespacePrefix" in op;
}
function isList(op: Op): op is ListNamespacesOperation {
  return "limit" in op && !("namespacePrefix" in op) && !("namespace" in op);
}

export class MemsvcStore extends BaseStore {
  readonly client: MemsvcClient;
  readonly ttlConfig: TTLConfig | undefined;
  readonly readYourWrites: boolean;
  readonly searchMode: SearchMode | undefined;
  private readonly defaultIndex: string[] | undefined;
  private readonly expiries = new Map<string, number>(); // what sweepExpiredItems counts
  readonly supportsTtl = true;

  constructor(options: MemsvcStoreOptions = {}) {
    super();
    const { client, ttl, index, readYourWrites, searchMode, ...transport } = options;
    this.client = client ?? new MemsvcClient(transport);
    this.ttlConfig = ttl;
    const fields = index?.fields;
    this.defaultIndex = !fields || (fields.length === 1 && fields[0] === "$") ? undefined : [...fields];
    this.readYourWrites = readYourWrites ?? true;
    this.searchMode = searchMode;
  }

  // -- BaseStore's conveniences, with LangGraph's TTL arguments --

  override async get(namespace: string[], key: string, options: { refreshTtl?: boolean } = {}): Promise<Item | null> {
    const op: MemsvcGetOperation = { namespace, key, refreshTtl: options.refreshTtl };
    return (await this.batch([op]))[0] as Item | null;
  }

  /** `options.ttl`: minutes (`null`: none; absent: `ttl.defaultTtl`). */
  override async put(
    namespace: string[],
    key: string,
    value: Record<string, unknown>,
    index?: false | string[],
    options: { ttl?: number | null } = {},
  ): Promise<void> {
    validateNamespace(namespace);
    const op: MemsvcPutOperation = { namespace, key, value, index };
    if ("ttl" in options) op.ttl = options.ttl;
    await this.batch([op]);
  }

  override async search(
    namespacePrefix: string[],
    options: { filter?: Record<string, unknown>; limit?: number; offset?: number; query?: string; refreshTtl?: boolean } = {},
  ): Promise<SearchItem[]> {
    const { filter, limit = 10, offset = 0, query, refreshTtl } = options;
    const op: MemsvcSearchOperation = { namespacePrefix, filter, limit, offset, query, refreshTtl };
    return (await this.batch([op]))[0] as SearchItem[];
  }

  // -- the primitive --

  async batch<O extends Operation[]>(operations: O): Promise<OperationResults<O>> {
    const results: unknown[] = new Array(operations.length).fill(undefined);
    for (const phase of plan(operations)) {
      const outcomes = await Promise.allSettled(phase.map(([, op]) => this.run(op)));
      const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
      if (failed) throw failed.reason; // the first by op order, once all are done
      phase.forEach(([i], n) => {
        results[i] = (outcomes[n] as PromiseFulfilledResult<unknown>).value;
      });
    }
    return results as OperationResults<O>;
  }

  private run(op: Op): Promise<unknown> {
    if (isPut(op)) return this.runPut(op);
    if (isSearch(op)) return this.runSearch(op);
    if (isGet(op)) return this.runGet(op);
    return this.runList(op as ListNamespacesOperation);
  }

  private refresh(asked: boolean | undefined): boolean {
    return asked ?? this.ttlConfig?.refreshOnRead ?? true;
  }

  private async runGet(op: MemsvcGetOperation): Promise<Item | null> {
    let data: MemoryItem;
    try {
      data = await this.client.get(op.namespace, op.key, this.refresh(op.refreshTtl) ? { refreshTtl: true } : {});
    } catch (e) {
      if (e instanceof NotFoundError) {
        this.saw(op.namespace, op.key, null);
        return null;
      }
      throw e;
    }
    this.saw(data.namespace, data.key, data.expires_at);
    return {
      value: data.value,
      key: data.key,
      namespace: data.namespace,
      createdAt: new Date(data.created_at),
      updatedAt: new Date(data.updated_at),
    };
  }

  private async runPut(op: MemsvcPutOperation): Promise<void> {
    if (op.value === null) {
      await this.client.delete(op.namespace, op.key);
      this.saw(op.namespace, op.key, null);
      return;
    }
    const minutes = "ttl" in op && op.ttl !== undefined ? op.ttl : this.ttlConfig?.defaultTtl;
    const ttlSeconds = minutesToTtlSeconds(minutes ?? null);
    const index = op.index !== undefined ? op.index : this.defaultIndex;
    const written = await this.client.put(op.namespace, op.key, op.value as JsonObject, {
      ttlSeconds: ttlSeconds ?? undefined,
      indexFields: index === undefined ? undefined : index === false ? false : [...index],
      syncIndex: this.readYourWrites ? true : undefined,
    });
    this.saw(op.namespace, op.key, written?.expires_at ?? null);
  }

  private async runSearch(op: MemsvcSearchOperation): Promise<SearchItem[]> {
    const query = op.query && op.query.trim() ? op.query : undefined; // LangGraph's stores treat "" as no query
    const filter = op.filter && Object.keys(op.filter).length ? translateFilter(op.filter) : undefined;
    const found: SearchItem[] = [];
    let offset = op.offset ?? 0;
    let remaining = op.limit ?? 10;
    while (remaining > 0) {
      const page = Math.min(remaining, SEARCH_PAGE);
      const { items } = await this.client.search(op.namespacePrefix, {
        query,
        mode: query ? this.searchMode : undefined,
        filter,
        refreshTtl: this.refresh(op.refreshTtl) ? true : undefined,
        limit: page,
        offset,
      });
      for (const d of items) {
        this.saw(d.namespace, d.key, d.expires_at);
        const item: SearchItem = {
          namespace: d.namespace,
          key: d.key,
          value: d.value,
          createdAt: new Date(d.created_at),
          updatedAt: new Date(d.updated_at),
        };
        if (d.score !== null && d.score !== undefined) item.score = d.score;
        found.push(item);
      }
      if (items.length < page) break;
      offset += page;
      remaining -= page;
    }
    return found;
  }

  private async runList(op: ListNamespacesOperation): Promise<string[][]> {
    const merged = mergeConditions(op.matchConditions ?? []);
    if (merged === null) return []; // two conditions no namespace can meet together
    let maxDepth = op.maxDepth;
    const found: string[][] = [];
    let offset = op.offset ?? 0;
    let remaining = op.limit ?? 100;
    while (remaining > 0) {
      const page = Math.min(remaining, LIST_PAGE);
      let namespaces: string[][];
      try {
        ({ namespaces } = await this.client.listNamespaces({ prefix: merged.prefix, suffix: merged.suffix, maxDepth, limit: page, offset }));
      } catch (e) {
        // Deeper than the tenant's max_depth: no namespace is that deep, so it is no limit.
        if (e instanceof InvalidArgumentError && maxDepth !== undefined && maxDepth >= 1 && e.details.field === "max_depth") {
          maxDepth = undefined;
          continue;
        }
        throw e;
      }
      found.push(...namespaces);
      if (namespaces.length < page) break;
      offset += page;
      remaining -= page;
    }
    return found;
  }

  // -- TTL: LangGraph's Postgres store sweeps from the client; the service sweeps itself --

  /** The number of items this store has seen (written, read or found) with an expiry that has
   * passed since, each counted once. The service deletes expired items by itself and never
   * returns one, so there is nothing to delete here. */
  async sweepExpiredItems(): Promise<number> {
    const now = Date.now();
    let n = 0;
    for (const [item, expires] of this.expiries) {
      if (expires <= now) {
        this.expiries.delete(item);
        n += 1;
      }
    }
    return n;
  }

  private saw(namespace: readonly string[], key: string, expiresAt: string | null | undefined): void {
    const id = JSON.stringify([namespace, key]);
    if (expiresAt) this.expiries.set(id, Date.parse(expiresAt));
    else this.expiries.delete(id);
  }
}

// -- helpers --

/** Validate the ops and split them into phases run one after the other, each concurrently:
 * phase 1 holds every read and every put no read of this batch could observe; phase 2 the puts
 * that some read could observe. Of several puts to one key only the last is sent. */
function plan(ops: readonly Op[]): Array<Array<[number, Op]>> {
  const reads: Array<[number, Op]> = [];
  const puts = new Map<string, [number, MemsvcPutOperation]>();
  ops.forEach((op, i) => {
    if (isPut(op)) {
      validateNamespace(op.namespace);
      if (op.ttl !== undefined) minutesToTtlSeconds(op.ttl);
      const id = JSON.stringify([op.namespace, op.key]);
      puts.delete(id); // keep the order of the last put
      puts.set(id, [i, op]);
    } else if (isSearch(op)) {
      if (op.filter) translateFilter(op.filter); // an invalid key fails the batch before anything is sent
      reads.push([i, op]);
    } else if (isGet(op) || isList(op)) {
      reads.push([i, op]);
    } else {
      throw new Error(`Unknown operation type: ${JSON.stringify(op)}`);
    }
  });
  const first: Array<[number, Op]> = [...reads];
  const later: Array<[number, Op]> = [];
  for (const [i, put] of puts.values()) {
    (reads.some(([, r]) => observes(r, put.namespace, put.key)) ? later : first).push([i, put]);
  }
  first.sort((a, b) => a[0] - b[0]);
  later.sort((a, b) => a[0] - b[0]);
  return [first, later].filter((phase) => phase.length > 0);
}

function startsWith(ns: readonly string[], prefix: readonly string[]): boolean {
  return prefix.length <= ns.length && prefix.every((s, i) => ns[i] === s);
}

/** Could this read's result change if (ns, key) were written or deleted? */
function observes(op: Op, ns: readonly string[], key: string): boolean {
  if (isSearch(op)) return startsWith(ns, op.namespacePrefix);
  if (isGet(op)) return op.key === key && op.namespace.length === ns.length && startsWith(ns, op.namespace);
  return ((op as ListNamespacesOperation).matchConditions ?? []).every((c) => patternMatches(c, ns));
}

function patternMatches(condition: MatchCondition, ns: readonly string[]): boolean {
  const path = condition.path;
  if (ns.length < path.length) return false;
  const part = condition.matchType === "prefix" ? ns.slice(0, path.length) : ns.slice(ns.length - path.length);
  return path.every((p, i) => p === "*" || p === part[i]);
}

/** The API takes one prefix and one suffix pattern; LangGraph allows several of each (all must
 * hold). Merge them position by position; null when two literals clash. */
export function mergeConditions(conditions: readonly MatchCondition[]): { prefix: string[]; suffix: string[] } | null {
  const merged: { prefix: string[]; suffix: string[] } = { prefix: [], suffix: [] };
  for (const condition of conditions) {
    if (condition.matchType !== "prefix" && condition.matchType !== "suffix") {
      throw new Error(`Unsupported match type: ${String(condition.matchType)}`);
    }
    const suffix = condition.matchType === "suffix";
    const path = suffix ? [...condition.path].reverse() : [...condition.path];
    const into = suffix ? [...merged.suffix].reverse() : [...merged.prefix];
    for (let i = 0; i < path.length; i += 1) {
      const segment = path[i];
      if (i === into.length) into.push(segment);
      else if (into[i] === "*") into[i] = segment;
      else if (segment !== "*" && segment !== into[i]) return null;
    }
    if (suffix) merged.suffix = into.reverse();
    else merged.prefix = into;
  }
  return merged;
}

/** LangGraph's filter in the API's form. Operator objects (`{$gt: 3}`) and scalars pass
 * through; a nested object without operators (`{meta: {lang: "en"}}`) becomes dot paths
 * (`{"meta.lang": "en"}`). Infinities and NaN, which JSON cannot carry, go as
 * `{$numberDouble: "Infinity" | "-Infinity" | "NaN"}`. Throws for a key that is not a dot path
 * of non-empty names, before anything is sent. */
export function translateFilter(filter: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const walk = (prefix: string, spec: Record<string, unknown>): void => {
    for (const [name, value] of Object.entries(spec)) {
      if (name.split(".").includes("")) {
        throw new Error(`Invalid filter key: '${name}'. Filter keys must be dot paths of non-empty field names.`);
      }
      const path = prefix ? `${prefix}.${name}` : name;
      if (isPlainObject(value) && Object.keys(value).length && !Object.keys(value).some((k) => k.startsWith("$"))) {
        walk(path, value);
      } else if (isPlainObject(value)) {
        const ops: Record<string, unknown> = {};
        for (const [op, operand] of Object.entries(value)) {
          ops[op] = op === "$not" && isPlainObject(operand)
            ? Object.fromEntries(Object.entries(operand).map(([k, v]) => [k, encodeOperand(v)]))
            : encodeOperand(operand);
        }
        out[path] = ops;
      } else {
        out[path] = encodeOperand(value);
      }
    }
  };
  walk("", filter);
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function encodeOperand(operand: unknown): unknown {
  if (Array.isArray(operand)) return operand.map(encodeOperand);
  if (typeof operand === "number" && !Number.isFinite(operand)) {
    return { $numberDouble: Number.isNaN(operand) ? "NaN" : operand > 0 ? "Infinity" : "-Infinity" };
  }
  return operand;
}

/** LangGraph's `ttl` (minutes) as the API's `ttl_seconds`: rounded up, at least 1 second. */
export function minutesToTtlSeconds(minutes: number | null | undefined): number | null {
  if (minutes === null || minutes === undefined) return null;
  if (typeof minutes !== "number" || !(minutes > 0) || !Number.isFinite(minutes)) {
    throw new Error(`ttl must be a positive number of minutes or null, got ${String(minutes)}`);
  }
  return Math.max(1, Math.ceil(Number((minutes * 60).toFixed(6))));
}
