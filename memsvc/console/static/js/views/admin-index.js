import { h, notice, replace } from "../dom.js";
import { button, detailsTable, errorNotice, table } from "./c2-ui.js";
export const adminIndexView = {
    path: "admin/index",
    title: "Index status",
    inMenu: true,
    admin: true,
    async render(root, ctx) {
        const status = h("div", { "data-testid": "index-status" });
        const result = h("div", { "aria-live": "polite", "data-testid": "index-result" });
        const refresh = async () => {
            try {
                replace(status, statusView(await ctx.api.get("/admin/v1/memories/index/status"), (ids) => void retry(ids)));
            }
            catch (error) {
                replace(status, errorNotice(error));
            }
        };
        const retry = async (ids) => {
            try {
                const answer = await ctx.api.post("/admin/v1/memories/index/retry", { ids });
                replace(result, notice(`Queued again: ${answer.retried.length}.${answer.failed.length
                    ? ` Not retried: ${answer.failed.map((f) => `${f.id} (${f.code})`).join(", ")}.` : ""}`));
            }
            catch (error) {
                replace(result, errorNotice(error));
            }
            await refresh();
        };
        const trigger = async () => {
            try {
                const run = await ctx.api.post("/admin/v1/memories/index/trigger", {});
                replace(result, notice(`Indexer run: ${run.processed} processed, ${run.pending} pending, ${run.quarantined} set aside.`));
            }
            catch (error) {
                replace(result, errorNotice(error));
            }
            await refresh();
        };
        root.append(h("div", { class: "row c2-actions" }, button("Run the indexer now", () => void trigger()), button("Refresh", () => void refresh(), { class: "secondary" })), result, status);
        await refresh();
    },
};
function statusView(status, retry) {
    const items = status.quarantined_items;
    return h("div", {}, detailsTable("The tenant's index", [["Pending", status.pending], ["Quarantined", status.quarantined],
        ["Embedding model", status.embedding_model], ["Dimension", status.dimension], ["Stats", status.stats]]), h("h2", {}, "Quarantined versions"), items.length
        ? h("div", {}, h("p", {}, button(`Retry all ${items.length} shown`, () => retry(items.map((i) => i.id))), status.quarantined > items.length ? h("span", { class: "muted" }, ` (${status.quarantined} in all; retrying these shows the next ones)`) : null), table("Quarantined versions, oldest first", ["Memory", "Version", "Reason", "Since", ""], items.map((item) => [
            `${item.namespace.join(" / ")} : ${item.key}`, String(item.version), item.reason, item.quarantined_at,
            button("Retry", () => retry([item.id]), { class: "secondary", "aria-label": `Retry ${item.key}` }),
        ])))
        : h("p", { class: "muted" }, "None: nothing is set aside."));
}
