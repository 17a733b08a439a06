/**
 * Memories: the caller's namespaces as a tree with how many memories each holds, and the memories
 * under the chosen one (a filter search on that prefix: newest first, paged by offset).
 */

import { formatNamespace, memoryHref, parseFilter, parseNamespace } from "../api.js";
import type { Context, View } from "../context.js";
import { Latest } from "../latest.js";
import { field, h, notice, preview, replace, table, time } from "../dom.js";
import { errorNotice } from "./c2-ui.js";

interface NamespacesAnswer {
  namespaces: string[][];
  /** Present when asked with counts=true: live memories under each namespace, itself and below. */
  counts?: number[];
  /** A count equal to this means "at least this many". */
  count_cap?: number;
}

interface ListedMemory {
  namespace: string[];
  key: string;
  value: Record<string, unknown>;
  updated_at: string;
  expires_at: string | null;
}

/** The most namespaces one call counts. */
const NAMESPACE_PAGE = 100;
const PAGE_SIZES = [10, 25, 50, 100];

export const memoriesView: View = {
  path: "memories",
  title: "Memories",
  inMenu: true,
  render(root, ctx) {
    const selected = selectedNamespace(ctx.params);
    const under = ctx.params.get("under") ?? "";
    const treeBox = h("div", { class: "tree-box" });
    const listBox = h("div", { class: "list-box" });
    root.append(h("div", { class: "split" }, treeBox, listBox));
    drawTree(treeBox, ctx, under, selected);
    if (selected instanceof Error) replace(listBox, notice(selected.message, "error"));
    else if (selected) drawList(listBox, ctx, selected);
    else replace(listBox, notice("Choose a namespace to see its memories."));
  },
};

/** The `ns` parameter, a JSON array of segments; null when none is chosen. */
function selectedNamespace(params: URLSearchParams): string[] | null | Error {
  const text = params.get("ns");
  if (text === null) return null;
  try {
    return parseNamespace(text);
  } catch (error) {
    return error instanceof Error ? error : new Error("The namespace in the address is not valid.");
  }
}

function drawTree(box: HTMLElement, ctx: Context, under: string, selected: string[] | null | Error): void {
  const underInput = h("input", { name: "under", value: under, autocomplete: "off", spellcheck: "false" });
  const form = h("form", { class: "row", role: "search", "aria-label": "Namespaces" },
    field("List namespaces under", underInput, "Empty: your own (user/<you>). E.g. project/apollo or company."),
    h("button", { type: "submit", class: "secondary" }, "List"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.navigate("memories", underInput.value.trim() ? { under: underInput.value.trim() } : {});
  });
  const tree = h("nav", { class: "tree", "aria-label": "Namespace tree" }, h("p", { role: "status" }, "Loading namespaces…"));
  const more = h("button", { type: "button", class: "secondary", hidden: true }, "More namespaces");
  replace(box, h("h2", {}, "Namespaces"), form, tree, more);
  const listed: Required<NamespacesAnswer> = { namespaces: [], counts: [], count_cap: Number.POSITIVE_INFINITY };
  const current = Array.isArray(selected) ? JSON.stringify(selected) : null;

  async function load(): Promise<void> {
    more.disabled = true;
    try {
      const answer = await ctx.api.get<NamespacesAnswer>("/v1/memories/namespaces",
        { prefix: parseNamespace(under), counts: true, limit: NAMESPACE_PAGE, offset: listed.namespaces.length });
      listed.namespaces.push(...answer.namespaces);
      listed.counts.push(...(answer.counts ?? []));
      listed.count_cap = answer.count_cap ?? listed.count_cap;
      more.hidden = answer.namespaces.length < NAMESPACE_PAGE;
      if (!listed.namespaces.length) {
        replace(tree, notice("No namespaces here yet."));
        return;
      }
      const root = buildTree(listed);
      replace(tree, h("ul", {}, [...root.children.values()].map((node) => drawNode(node, under, current, listed.count_cap))));
    } catch (error) {
      replace(tree, errorNotice(error));
    } finally {
      more.disabled = false;
    }
  }

  more.addEventListener("click", () => void load());
  void load();
}

interface TreeNode {
  segment: string;
  path: string[];
  children: Map<string, TreeNode>;
  /** The API's count when the namespace itself was listed. */
  count: number | null;
}

/** The listed namespaces as a tree; segments in the order the API gave them. */
function buildTree(answer: NamespacesAnswer): TreeNode {
  const root: TreeNode = { segment: "", path: [], children: new Map(), count: null };
  answer.namespaces.forEach((namespace, index) => {
    let node = root;
    for (const segment of namespace) {
      let child = node.children.get(segment);
      if (!child) {
        child = { segment, path: [...node.path, segment], children: new Map(), count: null };
        node.children.set(segment, child);
      }
      node = child;
    }
    node.count = answer.counts?.[index] ?? null;
  });
  return root;
}

/** A node's memories: its own count when listed, else the sum of its nearest listed descendants'. */
function total(node: TreeNode, cap: number): { n: number; atLeast: boolean } | null {
  if (node.count !== null) return { n: node.count, atLeast: node.count >= cap };
  let n = 0;
  let atLeast = false;
  let found = false;
  for (const child of node.children.values()) {
    const part = total(child, cap);
    if (!part) continue;
    found = true;
    n += part.n;
    atLeast ||= part.atLeast;
  }
  return found ? { n, atLeast } : null;
}

function drawNode(node: TreeNode, under: string, current: string | null, cap: number): HTMLElement {
  const count = total(node, cap);
  const query: Record<string, string> = { ns: JSON.stringify(node.path) };
  if (under) query.under = under;
  const isCurrent = current === query.ns;
  return h("li", {},
    h("a", { href: `#/memories?${new URLSearchParams(query)}`, "aria-current": isCurrent ? "true" : null,
      title: formatNamespace(node.path) },
      h("span", { class: "segment" }, node.segment),
      count ? h("span", { class: "badge" }, `${count.n}${count.atLeast ? "+" : ""}`) : null,
      count ? h("span", { class: "sr-only" }, count.atLeast ? " memories or more" : " memories") : null),
    node.children.size
      ? h("ul", {}, [...node.children.values()].map((child) => drawNode(child, under, current, cap)))
      : null);
}

function drawList(box: HTMLElement, ctx: Context, namespace: string[]): void {
  const filter = h("textarea", { name: "filter", rows: 2, spellcheck: "false", placeholder: '{"lang": "python"}' });
  const limit = h("select", { name: "limit" }, PAGE_SIZES.map((n) => h("option", { value: n }, String(n))));
  const status = h("div", { class: "status" });
  const results = h("div");
  const previous = h("button", { type: "button", class: "secondary", disabled: true }, "Previous page");
  const next = h("button", { type: "button", class: "secondary", disabled: true }, "Next page");
  const form = h("form", { "aria-label": "Filter memories" },
    field("Filter (JSON)", filter, "As search's filter: value fields and policy attributes. Empty: every memory."),
    h("div", { class: "row" }, field("Per page", limit), h("button", { type: "submit" }, "Apply")));
  let offset = 0;
  // A page asked for while another is on its way: only the last one asked is shown.
  const loads = new Latest();

  async function load(): Promise<void> {
    let parsed: Record<string, unknown> | undefined;
    try {
      parsed = parseFilter(filter.value);
    } catch (error) {
      replace(status, notice(error instanceof Error ? error.message : "The filter is not valid.", "error"));
      return;
    }
    const size = Number(limit.value);
    const isLatest = loads.begin();
    replace(status, h("p", { role: "status" }, "Loading…"));
    try {
      const answer = await ctx.api.post<{ items: ListedMemory[] }>("/v1/memories/search",
        { namespace_prefix: namespace, filter: parsed, limit: size, offset });
      if (!isLatest()) return;
      const first = answer.items.length ? offset + 1 : offset;
      replace(status, h("p", { role: "status" },
        answer.items.length ? `Memories ${first}–${offset + answer.items.length}, newest first.` : "No memories here."));
      replace(results, answer.items.length ? memoryTable(answer.items, namespace) : "");
      previous.disabled = offset === 0;
      next.disabled = answer.items.length < size;
    } catch (error) {
      if (!isLatest()) return;
      replace(status, errorNotice(error));
      replace(results, "");
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); offset = 0; void load(); });
  previous.addEventListener("click", () => { offset = Math.max(0, offset - Number(limit.value)); void load(); });
  next.addEventListener("click", () => { offset += Number(limit.value); void load(); });
  replace(box, h("h2", {}, "In ", h("code", { "data-testid": "selected-namespace" }, formatNamespace(namespace))),
    form, status, results, h("div", { class: "row pager" }, previous, next));
  void load();
}

function memoryTable(items: ListedMemory[], namespace: string[]): HTMLElement {
  const depth = namespace.length;
  return table("Memories", ["Key", "Under", "Value", "Updated", "Expires"], items.map((item) => [
    h("a", { href: memoryHref(item.namespace, item.key), class: "key" }, item.key),
    h("span", { class: "muted" }, item.namespace.length > depth ? formatNamespace(item.namespace.slice(depth)) : "·"),
    h("code", { class: "preview" }, preview(item.value)),
    time(item.updated_at),
    time(item.expires_at),
  ]));
}
