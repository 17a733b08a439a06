import type { Context, View } from "../context.js";
import { field, h, notice, replace } from "../dom.js";
import { moreButton, detailsTable, errorNotice, loadInto } from "./c2-ui.js";

interface Session {
  session_id: string;
  agent_id: string | null;
  title: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
  last_interaction: string;
  version: number;
  message_count: number;
  closed_at: string | null;
  delete_after: string | null;
}

interface Message {
  seq: number;
  role: string;
  name: string | null;
  content: string;
  correlation_id: string | null;
  created_at: string;
}

const SESSIONS_PAGE = 20;
const MESSAGES_PAGE = 50;

export const sessionsView: View = {
  path: "sessions",
  title: "Sessions",
  inMenu: true,
  async render(root, ctx) {
    const id = ctx.params.get("id");
    if (id) await showSession(root, ctx, id);
    else showList(root, ctx);
  },
};

/** The caller's sessions, newest activity first, a page at a time. */
function showList(root: HTMLElement, ctx: Context): void {
  const agent = h("input", { type: "text", autocomplete: "off" });
  const rows = h("tbody");
  const more = h("div");
  const status = h("div", { "aria-live": "polite" });
  const load = async (cursor: string | null): Promise<void> => {
    try {
      const page = await ctx.api.get<{ sessions: Session[]; next_cursor: string | null }>("/v1/memory/sessions",
        { limit: SESSIONS_PAGE, cursor, agent_id: agent.value.trim() || undefined });
      if (!cursor) rows.replaceChildren();
      for (const session of page.sessions) {
        rows.append(h("tr", {},
          h("td", {}, h("a", { href: `#/sessions?${new URLSearchParams({ id: session.session_id })}` }, session.session_id)),
          h("td", {}, session.title ?? ""),
          h("td", {}, session.agent_id ?? ""),
          h("td", { class: "num" }, String(session.message_count)),
          h("td", {}, session.last_interaction),
          h("td", {}, session.closed_at ? `closed ${session.closed_at}` : "open")));
      }
      replace(status, rows.children.length ? null : notice("No sessions."));
      replace(more, page.next_cursor ? moreButton("More sessions", () => load(page.next_cursor)) : null);
    } catch (error) {
      replace(status, errorNotice(error));
    }
  };
  root.append(
    h("form", { class: "card", "aria-label": "Filter sessions", onsubmit: (event: Event) => { event.preventDefault(); void load(null); } },
      h("div", { class: "row" }, field("Agent id", agent, "Empty: every agent")), h("button", { type: "submit" }, "List sessions")),
    status,
    h("div", { class: "table-wrap" }, h("table", { "data-testid": "sessions" },
      h("caption", { class: "c2-caption" }, "Your sessions"),
      h("thead", {}, h("tr", {}, ["Session", "Title", "Agent", "Messages", "Last interaction", "State"].map((t) => h("th", { scope: "col" }, t)))),
      rows)),
    more);
  void load(null);
}

/** One session: its fields, then its messages in order, a page at a time. */
async function showSession(root: HTMLElement, ctx: Context, id: string): Promise<void> {
  const path = `/v1/memory/sessions/${encodeURIComponent(id)}`;
  const head = h("div");
  root.append(h("p", {}, h("a", { href: "#/sessions" }, "All sessions")), head);
  await loadInto(head, async () => {
    const session = await ctx.api.get<Session>(path);
    return [h("h2", {}, session.title ? `${session.title} (${session.session_id})` : session.session_id),
      detailsTable("The session", [["Agent", session.agent_id], ["Created", session.created_at], ["Last interaction", session.last_interaction],
        ["Messages", session.message_count], ["Version", session.version], ["Closed", session.closed_at],
        ["Deleted after", session.delete_after], ["Metadata", session.metadata]])];
  });
  const list = h("ol", { class: "c2-messages", "data-testid": "messages" });
  const more = h("div");
  const status = h("div", { "aria-live": "polite" });
  root.append(h("h2", {}, "Messages"), status, list, more);
  const load = async (afterSeq: number): Promise<void> => {
    try {
      const page = await ctx.api.get<{ messages: Message[]; next_after_seq: number | null }>(`${path}/messages`,
        { after_seq: afterSeq, limit: MESSAGES_PAGE });
      for (const message of page.messages) {
        list.append(h("li", { class: `c2-message c2-role-${message.role}`, value: message.seq },
          h("div", { class: "c2-message-head" },
            h("strong", {}, message.name ? `${message.name} (${message.role})` : message.role),
            h("span", { class: "muted" }, ` #${message.seq} · ${message.created_at}`),
            message.correlation_id ? h("span", { class: "muted" }, ` · correlation ${message.correlation_id}`) : null),
          h("p", { class: "c2-message-text" }, message.content)));
      }
      replace(status, list.children.length ? null : notice("No messages yet."));
      const next = page.next_after_seq;
      replace(more, next !== null ? moreButton("More messages", () => load(next)) : null);
    } catch (error) {
      replace(status, errorNotice(error));
    }
  };
  await load(0);
}
