/** The shapes of requests and answers (API.md, API-AGENT.md). Answers may carry more fields. */

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type JsonObject = Record<string, any>;

export type MemoryType = "fact" | "preference" | "decision" | "note";
export type MemoryKind = "semantic" | "episodic";
export type SearchMode = "hybrid" | "semantic" | "keyword";
export type RecallOrder = "relevance" | "precedence";
export type MessageRole = "user" | "assistant" | "system" | "tool";
export type ExtractMode = "off" | "on_close" | "continuous";
export type PlanStatus = "running" | "completed" | "failed" | "cancelled";
export type EventKind = "add" | "update" | "delete" | "expired";
export type EntityType = "PERSON" | "PROJECT" | "ORGANIZATION" | "TICKET" | "SYSTEM" | "PLACE" | "EVENT" | "CONCEPT";
export type RelationType =
  | "WORKS_ON" | "CAUSED_BY" | "RELATES_TO" | "DEPENDS_ON" | "PART_OF" | "OWNS" | "USES" | "BLOCKS"
  | "FIXES" | "MEMBER_OF" | "REPORTS_TO" | "LOCATED_IN";

export interface Identifiers {
  agent_id?: string;
  user_id?: string;
  session_id?: string;
  project_id?: string;
  team_id?: string;
  org_id?: string;
}

export interface PutOptions {
  attributes?: JsonObject;
  /** Seconds until the item expires (> 0). */
  ttlSeconds?: number;
  /** Dot paths of `value` to embed (`arr[*].x` selects every element), or `false` for none. Default: every string leaf. */
  indexFields?: readonly string[] | false;
  /** Answer only once the item's vectors are written, so a search right after finds it. */
  syncIndex?: boolean;
}

export interface PutMemoryResult {
  id: string;
  namespace: string[];
  key: string;
  attributes: JsonObject | null;
  created_at: string;
  updated_at: string;
  expires_at: string | null;
  version: number;
}

export interface MemoryItem extends PutMemoryResult {
  value: JsonObject;
}

export interface SearchOptions {
  query?: string;
  /** Flat, ANDed: `{"meta.lang": "en", "n": {"$gt": 3}, "tag": {"$in": ["a", "b"]}}`. */
  filter?: JsonObject;
  limit?: number;
  offset?: number;
  mode?: SearchMode;
  minScore?: number;
  refreshTtl?: boolean;
  /** RFC 3339: only what held then. */
  asOf?: string;
  /** RFC 3339: the versions memsvc held then. */
  knownAt?: string;
  temporal?: boolean;
}

export interface SearchHit extends MemoryItem {
  score: number | null;
  scores?: { semantic: number | null; keyword: number | null };
}

export interface SearchResult {
  items: SearchHit[];
}

export interface ListNamespacesOptions {
  prefix?: readonly string[];
  suffix?: readonly string[];
  maxDepth?: number;
  limit?: number;
  offset?: number;
  /** Also count each namespace's live items, itself and below (`counts`, `count_cap`). */
  counts?: boolean;
}

export interface NamespacesResult {
  namespaces: string[][];
  /** With `counts`: aligned with `namespaces`. */
  counts?: number[];
  /** With `counts`: a count equal to it means at least that many. */
  count_cap?: number;
}

/** `GET /v1/identity`: who the service takes the caller to be. */
export interface IdentityResult {
  tenant_id: string;
  user_id: string;
  roles: string[];
  auth: "jwt" | "iam";
  /** jwt: the token's claims as the authorizer passed them on; iam: accountId, userArn, userId, ... */
  claims: JsonObject;
}

/** `PUT /admin/v1/memories/policies?dry_run=true`: the bundle would be accepted; nothing stored. */
export interface PolicyCheckResult {
  valid: true;
}

export interface EventsOptions {
  namespacePrefix?: readonly string[];
  kinds?: readonly EventKind[];
  after?: string;
  before?: string;
  afterCursor?: string;
  limit?: number;
}

export interface TimelineEvent {
  id: string;
  namespace: string[];
  key: string;
  kind: EventKind;
  occurred_at: string;
  value: JsonObject | null;
  attributes: JsonObject | null;
  expires_at: string | null;
}

export interface EventsResult {
  events: TimelineEvent[];
  after_cursor: string | null;
}

/** The optional fields of `POST /v1/memories/remember`, named as the API names them. */
export interface RememberFields {
  type?: MemoryType;
  kind?: MemoryKind;
  layer?: string;
  identifiers?: Identifiers;
  namespace?: readonly string[];
  category?: string;
  tags?: readonly string[];
  importance?: number;
  pinned?: boolean;
  source?: string;
  ttl_seconds?: number;
  consolidate?: boolean;
  wait?: boolean;
  valid_from?: string;
  valid_to?: string;
  [field: string]: unknown;
}

export interface RememberResult {
  action?: "created" | "updated" | "unchanged" | "superseded";
  memory?: MemoryItem;
  neighbors?: Array<{ key: string; score: number }>;
  judge?: { asked: boolean; same_fact: boolean | null };
  /** With `wait: false` (202). */
  candidate_id?: string;
}

/** The optional fields of `POST /v1/memories/recall`, named as the API names them. */
export interface RecallFields {
  layers?: readonly string[];
  identifiers?: Identifiers;
  namespace_prefix?: readonly string[];
  types?: readonly MemoryType[];
  filter?: JsonObject;
  limit?: number;
  min_score?: number;
  token_budget?: number;
  mode?: SearchMode;
  order?: RecallOrder;
  include_superseded?: boolean;
  include_archived?: boolean;
  graph_hops?: number;
  as_of?: string;
  known_at?: string;
  temporal?: boolean;
  /** Each memory's `explain` and `metadata.cut`. */
  explain?: boolean;
  [field: string]: unknown;
}

/** How a recalled memory's relevance was computed (recall with `explain`). */
export interface RecallExplanation {
  keyword: number | null;
  semantic: number | null;
  fused: number;
  match: number;
  importance: number;
  recency: number;
  pinned: 0 | 1;
  weights: { match: number; importance: number; recency: number; pinned: number };
  relevance: number;
}

/** A candidate recall left out (recall with `explain`), and why. */
export interface RecallCut {
  id: string;
  namespace: string[];
  key: string;
  layer: string | null;
  relevance: number | null;
  match: number;
  reason: "below_min_score" | "below_min_match" | "over_limit" | "token_budget" | "duplicate";
}

export interface RecalledMemory {
  id: string;
  namespace: string[];
  key: string;
  layer: string | null;
  content: string;
  type: MemoryType | "message" | null;
  relevance: number;
  match: number;
  importance: number | null;
  pinned: boolean | null;
  tags: string[];
  category: string | null;
  source: string | null;
  created_at: string;
  updated_at: string;
  /** With `explain`, for a hit (absent for a memory graph expansion added). */
  explain?: RecallExplanation;
}

export interface RecallResult {
  memories: RecalledMemory[];
  metadata: {
    count: number;
    total_count: number;
    truncated: boolean;
    token_count: number;
    token_budget: number;
    searched_layers: string[];
    query_embedding_ms: number;
    retrieval_ms: number;
    /** With `explain`: at most 50, most relevant first. */
    cut?: RecallCut[];
    [field: string]: unknown;
  };
}

export interface ExtractMessage {
  role: MessageRole;
  content: string;
  name?: string;
  created_at?: string;
}

export interface AppendedMessage {
  message_id: string;
  seq: number;
  created_at: string;
}

export interface TaskContextFields {
  planId?: string;
  responseEvent?: string;
  responseTopic?: string;
  data?: JsonObject;
  subTasks?: readonly string[];
  state?: JsonObject;
}

/** An entity's name, or a memory. */
export type GraphEndpoint = string | { namespace: readonly string[]; key: string };

export interface HealthReport {
  status: "healthy" | "degraded" | "unhealthy";
  components: Record<string, JsonObject>;
}

/** An item of the LangGraph Platform store API (`/store/...`). */
export interface StoreItem {
  namespace: string[];
  key: string;
  value: JsonObject;
  created_at: string;
  updated_at: string;
  score?: number | null;
}
