/**
 * The timeline: GET /v1/memories/events as a live list, newest first. It walks the pages from the
 * chosen start to the present, then asks again every 2 s from where it stopped (`resume_cursor`),
 * so a change shows up without a reload. The page keeps the newest 500 rows.
 */

import { formatNamespace, memoryHref, parseNamespace, type Query } from "../api.js";
import type { Context, View } from "../context.js";
import { field, h, preview, replace, time } from "../dom.js";
import { errorNotice } from "./c2-ui.js";

interface TimelineEvent {
  id: string;
  namespace: string[];
  key: string;
  kind: string;
  action?: string | null;
  reason?: string | null;
  occurred_at: string;
  value: Record<string, unknown> | null;
  version: number;
}

interface EventsAnswer {
  events: TimelineEvent[];
  after_cursor: string | null;
  resume_cursor: string | null;
}

const KINDS = ["add", "update", "delete", "expired", "index_failed"];
const MAX_ROWS = 500;
const PAGE = 200;
const POLL_MS = 2000;
/** Pages read in one go before yielding to the next tick: a long backlog is caught up bounded. */
const PAGES_PER_TICK = 10;

export const timelineView: View = {
  path: "timeline",
  title: "Timeline",
  inMenu: true,
  render(root, ctx) {
    const prefix = h("input", { name: "prefix", autocomplete: "off", spellcheck: "false" });
    const after = h("input", { name: "after", type: "datetime-local", step: 1 });
    const kinds = KINDS.map((kind) => h("input", { type: "checkbox", name: "kind", value: kind, id: `kind-${kind}` }));
    const form = h("form", { class: "card", "aria-label": "Timeline filters" },
      h("div", { class: "row" },
        field("Namespace prefix", prefix, "Segments joined by /; empty: your own (user/<you>)."),
        field("After (your local time)", after, "Empty: from the oldest event kept.")),
      h("fieldset", { class: "checks" }, h("legend", {}, "Kinds"),
        kinds.map((input) => h("label", { for: input.id }, input, ` ${input.value}`)),
        h("small", { class: "hint" }, "None: every kind.")),
      h("button", { type: "submit" }, "Follow"));
    const status = h("div");
    const live = h("p", { role: "status", class: "muted", "data-testid": "timeline-status" });
    const body = h("tbody");
    const list = h("div", { class: "table-wrap" },
      h("table", { "aria-label": "Events, newest first", "data-testid": "timeline" },
        h("thead", {}, h("tr", {}, ["When", "Change", "Namespace", "Key", "Version", "Value"].map((t) => h("th", { scope: "col" }, t)))),
        body));
    root.append(form, status, live, list);

    let follower: Follower | null = null;
    const start = () => {
      follower?.stop();
      replace(status);
      replace(body);
      let query: Query;
      try {
        query = {
          ns: parseNamespace(prefix.value),
          kinds: kinds.filter((k) => k.checked).map((k) => k.value),
          after: after.value ? new Date(after.value).toISOString() : undefined,
          limit: PAGE,
        };
      } catch (error) {
        replace(status, errorNotice(error));
        return;
      }
      follower = new Follower(ctx, query, body, live, status);
    };
    form.addEventListener("submit", (event) => { event.preventDefault(); start(); });
    start();
    return () => follower?.stop();
  },
};

class Follower {
  private cursor: string | null = null;
  private timer: number | undefined;
  private stopped = false;
  private rows = 0;
  private loaded = false;

  constructor(private readonly ctx: Context, private readonly query: Query, private readonly body: HTMLElement,
              private readonly live: HTMLElement, private readonly status: HTMLElement) {
    live.textContent = "Loading events…";
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async tick(): Promise<void> {
    try {
      let added = 0;
      for (let page = 0; page < PAGES_PER_TICK && !this.stopped; page += 1) {
        const answer = await this.ctx.api.get<EventsAnswer>("/v1/memories/events",
          { ...this.query, after: this.cursor ? undefined : this.query.after, after_cursor: this.cursor });
        if (this.stopped) return;
        for (const event of answer.events) this.prepend(event);
        added += answer.events.length;
        // after_cursor: more to read now; null: at the present, where resume_cursor picks up later.
        this.cursor = answer.after_cursor ?? answer.resume_cursor ?? this.cursor;
        if (answer.after_cursor === null) break;
      }
      replace(this.status);
      const plural = added === 1 ? "" : "s";
      if (!this.rows) this.live.textContent = "No events yet. Following: checking every 2 s.";
      else if (!this.loaded) this.live.textContent = `${added} event${plural} so far. Following: checking every 2 s.`;
      else if (added) this.live.textContent = `${added} new event${plural}. Following: checking every 2 s.`;
      this.loaded = true;
    } catch (error) {
      if (this.stopped) return;
      replace(this.status, errorNotice(error));
    }
    if (!this.stopped) this.timer = window.setTimeout(() => void this.tick(), POLL_MS);
  }

  /** Newest first: each event goes on top; past MAX_ROWS the oldest row goes. */
  private prepend(event: TimelineEvent): void {
    const live = event.kind === "add" || event.kind === "update";
    const row = h("tr", { "data-event": event.id },
      h("td", {}, time(event.occurred_at)),
      h("td", {}, h("span", { class: `badge kind-${event.kind}` }, event.kind), event.action ? ` ${event.action}` : "",
        event.reason ? h("div", { class: "muted" }, event.reason) : ""),
      h("td", {}, h("code", {}, formatNamespace(event.namespace))),
      h("td", {}, live ? h("a", { href: memoryHref(event.namespace, event.key), class: "key" }, event.key) : h("span", { class: "key" }, event.key)),
      h("td", { class: "num" }, String(event.version)),
      h("td", {}, event.value ? h("code", { class: "preview" }, preview(event.value)) : h("span", { class: "muted" }, "—")));
    this.body.prepend(row);
    this.rows += 1;
    if (this.rows > MAX_ROWS) {
      this.body.lastElementChild?.remove();
      this.rows -= 1;
    }
  }
}
