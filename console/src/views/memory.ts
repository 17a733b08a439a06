/**
 * One memory: its value, attributes, typed fields, valid time, TTL, where it came from, and every
 * version of it (GET /v1/memories/history, newest first, paged by its cursor).
 */

import { formatNamespace, memoryHref, parseNamespace } from "../api.js";
import type { Context, View } from "../context.js";
import { append, type Child, facts, h, notice, preview, pretty, replace, table, time } from "../dom.js";
import { errorNotice } from "./c2-ui.js";

interface Memory {
  id: string;
  namespace: string[];
  key: string;
  value: Record<string, unknown>;
  attributes: Record<string, unknown> | null;
  created_at: string;
  updated_at: string;
  expires_at: string | null;
  version: number;
}

interface HistoryVersion {
  id: string;
  memory_id: string;
  version: number;
  kind: string;
  action: string | null;
  reason: string | null;
  occurred_at: string;
  expires_at: string | null;
  value: Record<string, unknown> | null;
  replaced_by: { id: string; version: number; kind: string } | null;
  superseded_by: string | null;
  recorded: boolean;
}

interface HistoryAnswer {
  versions: HistoryVersion[];
  next_cursor: string | null;
  past_retention_before: number | null;
  retention_days: number;
}

/** A typed memory's fields (remember, extraction, feedback keep them in the value). */
const TYPE_FIELDS = ["type", "kind", "importance", "pinned", "tags", "category", "archived"];
/** Where a typed memory came from and what became of it. */
const PROVENANCE_FIELDS = ["source", "merged_from", "promoted_from", "superseded_by", "supersedes"];

export const memoryView: View = {
  path: "memory",
  title: "Memory",
  inMenu: false,
  async render(root, ctx) {
    const key = ctx.params.get("key");
    let namespace: string[];
    try {
      namespace = parseNamespace(ctx.params.get("ns") ?? "");
    } catch (error) {
      root.append(errorNotice(error));
      return;
    }
    if (!key || !namespace.length) {
      root.append(notice("No memory named: open one from Memories.", "error"));
      return;
    }
    root.append(h("p", {}, h("a", { href: `#/memories?${new URLSearchParams({ ns: JSON.stringify(namespace) })}` },
      "Back to ", formatNamespace(namespace))));
    let memory: Memory;
    try {
      memory = await ctx.api.get<Memory>("/v1/memories", { ns: namespace, key });
    } catch (error) {
      root.append(h("h2", {}, h("code", {}, key)), errorNotice(error), historySection(ctx, namespace, key));
      return;
    }
    append(root, [describeMemory(memory), historySection(ctx, namespace, key)]);
  },
};

function describeMemory(memory: Memory): Child[] {
  const value = memory.value;
  const typed = TYPE_FIELDS.filter((name) => name in value);
  const provenance = PROVENANCE_FIELDS.filter((name) => name in value);
  return [
    h("h2", {}, h("code", { "data-testid": "memory-key" }, memory.key)),
    facts([
      ["Namespace", h("code", {}, formatNamespace(memory.namespace))],
      ["Id", h("code", {}, memory.id)],
      ["Version", String(memory.version)],
      ["Created", time(memory.created_at)],
      ["Updated", time(memory.updated_at)],
      ["Expires", memory.expires_at ? [time(memory.expires_at), ` (${untilText(memory.expires_at)})`] : "never (no TTL)"],
    ]),
    h("h3", {}, "Value"),
    h("pre", { "data-testid": "memory-value" }, pretty(value)),
    h("h3", {}, "Attributes"),
    memory.attributes ? h("pre", {}, pretty(memory.attributes)) : h("p", { class: "muted" }, "None."),
    typed.length ? h("h3", {}, "Type") : null,
    typed.length ? facts(typed.map((name) => [name, fieldText(value[name])])) : null,
    h("h3", {}, "Valid time"),
    facts([
      ["Valid from", typeof value.valid_from === "string" ? time(value.valid_from) : ["since written (", time(memory.created_at), ")"]],
      ["Valid to", typeof value.valid_to === "string" ? time(value.valid_to) : "open"],
    ]),
    provenance.length ? h("h3", {}, "Provenance") : null,
    provenance.length ? facts(provenance.map((name) => [name, fieldText(value[name])])) : null,
  ];
}

function fieldText(value: unknown): Child {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "none");
  if (Array.isArray(value) && !value.length) return h("span", { class: "muted" }, "none");
  return h("code", {}, preview(value, 400));
}

/** "in 59 min" / "2 h ago": how far the expiry is from now. */
function untilText(iso: string): string {
  const minutes = Math.round((Date.parse(iso) - Date.now()) / 60_000);
  const span = Math.abs(minutes) >= 120 ? `${Math.round(Math.abs(minutes) / 60)} h` : `${Math.abs(minutes)} min`;
  return minutes >= 0 ? `in ${span}` : `${span} ago`;
}

function historySection(ctx: Context, namespace: string[], key: string): HTMLElement {
  const rows = h("div");
  const status = h("div");
  const more = h("button", { type: "button", class: "secondary", hidden: true }, "Older versions");
  const section = h("section", { "aria-labelledby": "history-title" }, h("h2", { id: "history-title" }, "History"), status, rows, more);
  let cursor: string | null = null;
  const versions: HistoryVersion[] = [];

  async function load(): Promise<void> {
    more.disabled = true;
    try {
      const answer: HistoryAnswer = await ctx.api.get<HistoryAnswer>("/v1/memories/history",
        { ns: namespace, key, limit: 20, cursor });
      versions.push(...answer.versions);
      cursor = answer.next_cursor;
      replace(rows, versions.length ? historyTable(versions, namespace) : notice("No versions recorded."));
      replace(status, answer.past_retention_before
        ? notice(`${answer.past_retention_before} older versions are past the tenant's retention (${answer.retention_days} days).`)
        : "");
      more.hidden = cursor === null;
    } catch (error) {
      replace(status, errorNotice(error));
    } finally {
      more.disabled = false;
    }
  }

  more.addEventListener("click", () => void load());
  void load();
  return section;
}

function historyTable(versions: HistoryVersion[], namespace: string[]): HTMLElement {
  return table("Versions, newest first", ["Version", "Change", "When", "Expires", "Value then", "Replaced by"],
    versions.map((v) => [
      String(v.version),
      [v.kind, v.action ? ` (${v.action})` : "", v.reason ? h("div", { class: "muted" }, v.reason) : "",
        v.recorded ? "" : h("div", { class: "muted" }, "not yet on the timeline")],
      time(v.occurred_at),
      time(v.expires_at),
      v.value ? h("code", { class: "preview" }, preview(v.value, 200)) : h("span", { class: "muted" }, "none"),
      [v.replaced_by ? `v${v.replaced_by.version} (${v.replaced_by.kind})` : "—",
        v.superseded_by ? h("div", {}, "superseded by ", h("a", { href: memoryHref(namespace, v.superseded_by) }, v.superseded_by)) : ""],
    ]), { numeric: [0] });
}
