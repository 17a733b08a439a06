/**
 * The search and recall playground: run POST /v1/memories/search or POST /v1/memories/recall with
 * any mode, filter, prefix or layers, and see why each result ranked where it did: search's
 * `score` with each signal's own, recall's `explain` parts, and what recall left out and why.
 */

import { errorText, formatNamespace, memoryHref, parseFilter, parseNamespace } from "../api.js";
import type { Context, View } from "../context.js";
import { Latest } from "../latest.js";
import { type Child, facts, field, h, notice, preview, replace, score, table } from "../dom.js";
import { errorNotice } from "./c2-ui.js";

interface SearchItem {
  namespace: string[];
  key: string;
  value: Record<string, unknown>;
  score: number | null;
  scores: { semantic: number | null; keyword: number | null; rerank?: number | null } | null;
}

interface SearchAnswer {
  items: SearchItem[];
  metadata: { degraded: boolean };
}

interface Explain {
  keyword: number | null;
  semantic: number | null;
  fused: number;
  match: number;
  importance: number;
  recency: number;
  pinned: number;
  weights: { match: number; importance: number; recency: number; pinned: number };
  relevance: number;
}

interface Recalled {
  namespace: string[];
  key: string;
  layer: string | null;
  content: string;
  type: string | null;
  relevance: number;
  explain?: Explain;
}

interface Cut {
  namespace: string[];
  key: string;
  layer: string | null;
  relevance: number | null;
  match: number;
  reason: string;
}

interface RecallAnswer {
  memories: Recalled[];
  metadata: {
    count: number;
    total_count: number;
    token_count: number;
    token_budget: number;
    searched_layers: string[];
    degraded: boolean;
    truncated: boolean;
    cut?: Cut[];
  };
}

const LAYERS = ["agent", "user", "session", "project", "team", "org", "company"];
const TYPES = ["fact", "preference", "decision", "note"];

/** Why recall left a candidate out, in words. */
const CUT_REASONS: Record<string, string> = {
  below_min_score: "its relevance is below the minimum score",
  below_min_match: "it matches the query too weakly (below the tenant's recall_min_match)",
  over_limit: "it ranked past the limit",
  token_budget: "it did not fit in the token budget",
  duplicate: "it repeats a memory already returned",
};

export const searchView: View = {
  path: "search",
  title: "Search and recall",
  inMenu: true,
  render(root, ctx) {
    const kind = h("select", { name: "kind" },
      h("option", { value: "recall" }, "Recall (ranked, within a token budget)"),
      h("option", { value: "search" }, "Search (by query or filter)"));
    const query = h("input", { name: "query", type: "search", autocomplete: "off" });
    const mode = h("select", { name: "mode" }, ["hybrid", "semantic", "keyword"].map((m) => h("option", { value: m }, m)));
    const prefix = h("input", { name: "prefix", autocomplete: "off", spellcheck: "false" });
    const limit = h("input", { name: "limit", type: "number", min: 1, max: 100, value: 10 });
    const minScore = h("input", { name: "min_score", type: "number", step: "0.05", min: -1, max: 1 });
    const budget = h("input", { name: "token_budget", type: "number", min: 1, max: 8000, value: 1000 });
    const filter = h("textarea", { name: "filter", rows: 3, spellcheck: "false", placeholder: '{"tags": {"contains": "travel"}}' });
    const layers = checkboxes("Layers", "layer", LAYERS, "None: every layer your identifiers give.");
    const types = checkboxes("Types", "type", TYPES, "None: every type, and plain items.");
    const recallOnly = h("div", { class: "row" }, layers.box, types.box, field("Token budget", budget));
    const status = h("div");
    const results = h("div", { class: "results" });
    const form = h("form", { class: "card", "aria-label": "Search or recall" },
      h("div", { class: "row" }, field("Run", kind), field("Query", query), field("Mode", mode)),
      h("div", { class: "row" },
        field("Namespace prefix", prefix, "Segments joined by /, e.g. user/alice. Search: empty is your own; recall: instead of layers."),
        field("Limit", limit), field("Minimum score", minScore, "Empty: the API's default.")),
      recallOnly,
      field("Filter (JSON)", filter, "Checked as JSON before it is sent."),
      h("button", { type: "submit" }, "Run"));

    const showKind = () => {
      recallOnly.hidden = kind.value !== "recall";
      limit.max = kind.value === "recall" ? "50" : "100";
    };
    kind.addEventListener("change", showKind);
    showKind();

    const runs = new Latest();
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const request = buildRequest({
        kind: kind.value, query: query.value.trim(), mode: mode.value, prefix: prefix.value, limit: limit.value,
        minScore: minScore.value, budget: budget.value, filter: filter.value, layers: layers.checked(), types: types.checked(),
      });
      if (typeof request === "string") {
        replace(status, notice(request, "error"));
        return;
      }
      void run(ctx, request, status, results, runs.begin());
    });
    root.append(form, status, results);
  },
};

interface FormValues {
  kind: string; query: string; mode: string; prefix: string; limit: string; minScore: string; budget: string;
  filter: string; layers: string[]; types: string[];
}

interface Request { path: "/v1/memories/search" | "/v1/memories/recall"; body: Record<string, unknown> }

/** The request the form describes, or what is wrong with it (before anything is sent). */
function buildRequest(form: FormValues): Request | string {
  let filter: Record<string, unknown> | undefined;
  let prefix: string[];
  try {
    filter = parseFilter(form.filter);
    prefix = parseNamespace(form.prefix);
  } catch (error) {
    return errorText(error);
  }
  const body: Record<string, unknown> = { limit: Number(form.limit) || undefined, filter };
  const minScore = form.minScore.trim() === "" ? undefined : Number(form.minScore);
  if (form.kind === "search") {
    body.namespace_prefix = prefix;
    if (form.query) Object.assign(body, { query: form.query, mode: form.mode, min_score: minScore });
    else if (minScore !== undefined) return "A minimum score needs a query: without one, search only filters.";
    return { path: "/v1/memories/search", body };
  }
  if (!form.query) return "Recall needs a query.";
  if (prefix.length && form.layers.length) return "Choose a namespace prefix or layers, not both.";
  Object.assign(body, {
    query: form.query, mode: form.mode, min_score: minScore, explain: true,
    token_budget: Number(form.budget) || undefined,
    namespace_prefix: prefix.length ? prefix : undefined,
    layers: form.layers.length ? form.layers : undefined,
    types: form.types.length ? form.types : undefined,
  });
  return { path: "/v1/memories/recall", body };
}

/** Runs `request` and shows its answer, unless another run was started meanwhile (`isLatest`). */
async function run(ctx: Context, request: Request, status: HTMLElement, results: HTMLElement,
                   isLatest: () => boolean): Promise<void> {
  replace(status, h("p", { role: "status" }, "Running…"));
  replace(results);
  try {
    const answer = await ctx.api.post<SearchAnswer | RecallAnswer>(request.path, withoutUndefined(request.body));
    if (!isLatest()) return;
    if ("items" in answer) {
      replace(status, h("p", { role: "status" }, `${answer.items.length} found${answer.metadata.degraded ? " (keywords only: the embedder failed)" : ""}.`));
      replace(results, searchTable(answer.items));
    } else {
      replace(status, h("p", { role: "status" }, `${answer.metadata.count} recalled of ${answer.metadata.total_count} that matched.`));
      replace(results, recallResults(answer));
    }
  } catch (error) {
    if (isLatest()) replace(status, errorNotice(error));
  }
}

function withoutUndefined(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
}

function keyLink(namespace: string[], key: string): HTMLElement {
  return h("a", { href: memoryHref(namespace, key), class: "key" }, key);
}

function searchTable(items: SearchItem[]): Child {
  if (!items.length) return notice("Nothing found.");
  return h("div", { "data-testid": "search-results" },
    table("Search results", ["#", "Key", "Namespace", "Value", "Score", "Semantic (cosine)", "Keyword"],
      items.map((item, i) => [
        String(i + 1), keyLink(item.namespace, item.key), h("code", {}, formatNamespace(item.namespace)),
        h("code", { class: "preview" }, preview(item.value)),
        score(item.score), score(item.scores?.semantic), score(item.scores?.keyword),
      ]), { numeric: [0, 4, 5, 6] }));
}

function recallResults(answer: RecallAnswer): Child {
  const meta = answer.metadata;
  const cut = meta.cut ?? [];
  const weights = answer.memories.find((m) => m.explain)?.explain?.weights;
  return [
    facts([
      ["Tokens", `${meta.token_count} of ${meta.token_budget}${meta.truncated ? " (the budget cut some out)" : ""}`],
      ["Layers searched", meta.searched_layers.length ? meta.searched_layers.join(", ") : "the namespace prefix"],
      ["Relevance", weights
        ? `${weights.match} × match + ${weights.importance} × importance + ${weights.recency} × recency + ${weights.pinned} × pinned`
        : "—"],
      ["Ranked by", meta.degraded ? "keywords only (the embedder failed)" : "meaning and keywords"],
    ]),
    h("h2", {}, "Recalled"),
    answer.memories.length
      ? h("div", { "data-testid": "recall-results" },
        table("Recalled memories and how each was scored",
          ["#", "Content", "Layer", "Type", "Relevance", "Keyword (BM25)", "Semantic (cosine)", "Fused", "Match",
            "Importance", "Recency", "Pinned"],
          answer.memories.map((m, i) => [
            String(i + 1), h("a", { href: memoryHref(m.namespace, m.key), class: "preview" }, preview(m.content, 200)),
            m.layer ?? "—", m.type ?? "—", score(m.relevance),
            score(m.explain?.keyword), score(m.explain?.semantic), score(m.explain?.fused), score(m.explain?.match),
            score(m.explain?.importance), score(m.explain?.recency), m.explain ? String(m.explain.pinned) : "—",
          ]), { numeric: [0, 4, 5, 6, 7, 8, 9, 10, 11] }))
      : notice("Nothing recalled."),
    h("h2", {}, "Left out"),
    cut.length
      ? h("div", { "data-testid": "recall-cut" },
        table("Candidates left out and why", ["Key", "Namespace", "Layer", "Relevance", "Match", "Why left out"],
          cut.map((c) => [
            keyLink(c.namespace, c.key), h("code", {}, formatNamespace(c.namespace)), c.layer ?? "—",
            score(c.relevance), score(c.match), CUT_REASONS[c.reason] ?? c.reason,
          ]), { numeric: [3, 4] }))
      : h("p", { class: "muted" }, "No candidate was left out."),
  ];
}

/** A group of checkboxes under one legend. */
function checkboxes(legend: string, name: string, values: string[], hint: string): { box: HTMLElement; checked(): string[] } {
  const inputs = values.map((value) => h("input", { type: "checkbox", name, value, id: `${name}-${value}` }));
  const box = h("fieldset", { class: "checks" }, h("legend", {}, legend),
    inputs.map((input) => h("label", { for: input.id }, input, ` ${input.value}`)),
    h("small", { class: "hint" }, hint));
  return { box, checked: () => inputs.filter((i) => i.checked).map((i) => i.value) };
}
