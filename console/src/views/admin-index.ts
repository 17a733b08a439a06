import type { View } from "../context.js";
import { h, notice, replace } from "../dom.js";
import { button, detailsTable, errorNotice, table } from "./c2-ui.js";

interface Quarantined {
  id: string;
  namespace: string[];
  key: string;
  version: number;
  reason: string;
  quarantined_at: string;
}

interface IndexStatus {
  pending: number;
  embedding_model: string;
  dimension: number;
  stats: Record<string, unknown>;
  quarantined: number;
  quarantined_items: Quarantined[];
}

interface RetryAnswer {
  retried: string[];
  failed: { id: string; code: string }[];
}

export const adminIndexView: View = {
  path: "admin/index",
  title: "Index status",
  inMenu: true,
  admin: true,
  async render(root, ctx) {
    const status = h("div", { "data-testid": "index-status" });
    const result = h("div", { "aria-live": "polite", "data-testid": "index-result" });
    const refresh = async (): Promise<void> => {
      try {
        replace(status, statusView(await ctx.api.get<IndexStatus>("/admin/v1/memories/index/status"), (ids) => void retry(ids)));
      } catch (error) {
        replace(status, errorNotice(error));
      }
    };
    const retry = async (ids: string[]): Promise<void> => {
      try {
        const answer = await ctx.api.post<RetryAnswer>("/admin/v1/memories/index/retry", { ids });
        replace(result, notice(`Queued again: ${answer.retried.length}.${answer.failed.length
          ? ` Not retried: ${answer.failed.map((f) => `${f.id} (${f.code})`).join(", ")}.` : ""}`));
      } catch (error) {
        replace(result, errorNotice(error));
      }
      await refresh();
    };
    const trigger = async (): Promise<void> => {
      try {
        const run = await ctx.api.post<{ processed: number; pending: number; quarantined: number }>("/admin/v1/memories/index/trigger", {});
        replace(result, notice(`Indexer run: ${run.processed} processed, ${run.pending} pending, ${run.quarantined} set aside.`));
      } catch (error) {
        replace(result, errorNotice(error));
      }
      await refresh();
    };
    root.append(h("div", { class: "row c2-actions" }, button("Run the indexer now", () => void trigger()), button("Refresh", () => void refresh(), { class: "secondary" })),
      result, status);
    await refresh();
  },
};

function statusView(status: IndexStatus, retry: (ids: string[]) => void): HTMLElement {
  const items = status.quarantined_items;
  return h("div", {},
    detailsTable("The tenant's index", [["Pending", status.pending], ["Quarantined", status.quarantined],
      ["Embedding model", status.embedding_model], ["Dimension", status.dimension], ["Stats", status.stats]]),
    h("h2", {}, "Quarantined versions"),
    items.length
      ? h("div", {},
        h("p", {}, button(`Retry all ${items.length} shown`, () => retry(items.map((i) => i.id))),
          status.quarantined > items.length ? h("span", { class: "muted" }, ` (${status.quarantined} in all; retrying these shows the next ones)`) : null),
        table("Quarantined versions, oldest first", ["Memory", "Version", "Reason", "Since", ""], items.map((item) => [
          `${item.namespace.join(" / ")} : ${item.key}`, String(item.version), item.reason, item.quarantined_at,
          button("Retry", () => retry([item.id]), { class: "secondary", "aria-label": `Retry ${item.key}` }),
        ])))
      : h("p", { class: "muted" }, "None: nothing is set aside."));
}

