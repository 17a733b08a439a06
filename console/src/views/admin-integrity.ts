import type { View } from "../context.js";
import { h, notice, replace } from "../dom.js";
import { button, errorNotice, table } from "./c2-ui.js";

export const adminIntegrityView: View = {
  path: "admin/integrity",
  title: "Integrity scan",
  inMenu: true,
  admin: true,
  render(root, ctx) {
    const result = h("div", { "aria-live": "polite", "data-testid": "integrity-result" });
    const run = async (): Promise<void> => {
      replace(result, notice("Scanning…"));
      try {
        const answer = await ctx.api.post<{ removed: Record<string, number> }>("/admin/v1/graph/integrity-scan", {});
        const rows = Object.entries(answer.removed);
        const total = rows.reduce((sum, [, n]) => sum + n, 0);
        replace(result,
          notice(total ? `The scan removed ${total} orphaned graph rows.` : "The scan found nothing to remove."),
          table("Removed by the scan", ["What", "Removed"], rows.map(([what, n]) => [what, String(n)])));
      } catch (error) {
        replace(result, errorNotice(error));
      }
    };
    root.append(
      h("p", {}, "Checks every derived graph key against the item store and removes mentions, nodes and edges that break an invariant (docs/graph.md)."),
      button("Run the integrity scan", () => void run()), result);
  },
};
