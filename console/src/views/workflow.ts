import type { Context, View } from "../context.js";
import { field, h, notice, pretty, replace } from "../dom.js";
import { button, moreButton, detailsTable, errorNotice, loadInto, table } from "./c2-ui.js";

interface TaskContext {
  task_id: string;
  plan_id: string | null;
  event_type: string;
  response_event: string | null;
  response_topic: string;
  data: Record<string, unknown>;
  sub_tasks: string[];
  state: Record<string, unknown>;
  created_at: string;
  updated_at: string;
  version: number;
}

interface Plan {
  plan_id: string;
  goal_event: string;
  goal_data: Record<string, unknown>;
  status: string;
  state: Record<string, unknown>;
  created_at: string;
  updated_at: string;
  version: number;
}

interface WorkingValue {
  key: string;
  value: unknown;
  version: number;
  updated_at: string;
  expires_at: string | null;
}

const PLANS_PAGE = 20;
const WORKING_PAGE = 100;

export const workflowView: View = {
  path: "workflow",
  title: "Tasks and plans",
  inMenu: true,
  async render(root, ctx) {
    const plan = ctx.params.get("plan");
    if (plan) {
      await showPlan(root, ctx, plan);
      return;
    }
    showTaskLookup(root, ctx);
    showPlans(root, ctx);
  },
};

/** Task contexts have no list route: one is looked up by its task id, or by one of its sub-tasks. */
function showTaskLookup(root: HTMLElement, ctx: Context): void {
  const id = h("input", { type: "text", autocomplete: "off" });
  const by = h("select", {}, h("option", { value: "task" }, "Task id"), h("option", { value: "subtask" }, "Sub-task id"));
  const result = h("div", { "aria-live": "polite", "data-testid": "task-context" });
  const lookUp = (kind: string, value: string): void => {
    by.value = kind;
    id.value = value;
    const path = kind === "subtask"
      ? `/v1/memory/task-context/by-subtask/${encodeURIComponent(value)}`
      : `/v1/memory/task-context/${encodeURIComponent(value)}`;
    void loadInto(result, async () => taskContext(await ctx.api.get<TaskContext>(path), (sub) => lookUp("subtask", sub)));
  };
  root.append(h("h2", {}, "Task context"),
    h("form", { class: "card", "aria-label": "Look up a task context", onsubmit: (event: Event) => {
      event.preventDefault();
      if (id.value.trim()) lookUp(by.value, id.value.trim());
      else replace(result, notice("Type a task or sub-task id.", "error"));
    } },
    h("div", { class: "row" }, field("Look up by", by), field("Id", id)),
    h("button", { type: "submit" }, "Look up")),
    result);
}

function taskContext(task: TaskContext, openSubTask: (id: string) => void): HTMLElement {
  return h("div", { class: "card" },
    h("h3", {}, `Task ${task.task_id}`),
    detailsTable("The task context", [["Event type", task.event_type], ["Response event", task.response_event],
      ["Response topic", task.response_topic], ["Plan", task.plan_id], ["Version", task.version],
      ["Created", task.created_at], ["Updated", task.updated_at], ["Data", task.data], ["State", task.state]]),
    h("h4", {}, `Sub-tasks still open (${task.sub_tasks.length})`),
    task.sub_tasks.length
      ? h("ul", {}, task.sub_tasks.map((sub) => h("li", {}, h("code", {}, sub), " ",
        button("Look up by this sub-task", () => openSubTask(sub), { class: "secondary", "aria-label": `Look up by sub-task ${sub}` }))))
      : h("p", { class: "muted" }, "None: every sub-task is done."));
}

/** The caller's plans, newest first, a page at a time; a plan opens with its working memory. */
function showPlans(root: HTMLElement, ctx: Context): void {
  const status = h("select", {}, h("option", { value: "" }, "Every status"), h("option", { value: "active" }, "Active (running)"));
  const body = h("tbody");
  const more = h("div");
  const state = h("div", { "aria-live": "polite" });
  const load = async (cursor: string | null): Promise<void> => {
    try {
      const page = await ctx.api.get<{ plans: Plan[]; next_cursor: string | null }>("/v1/memory/plans",
        { limit: PLANS_PAGE, cursor, status: status.value || undefined });
      if (!cursor) body.replaceChildren();
      for (const plan of page.plans) {
        body.append(h("tr", {},
          h("td", {}, h("a", { href: `#/workflow?${new URLSearchParams({ plan: plan.plan_id })}` }, plan.plan_id)),
          h("td", {}, plan.goal_event), h("td", {}, plan.status), h("td", {}, plan.updated_at), h("td", { class: "num" }, String(plan.version))));
      }
      replace(state, body.children.length ? null : notice("No plans."));
      replace(more, page.next_cursor ? moreButton("More plans", () => load(page.next_cursor)) : null);
    } catch (error) {
      replace(state, errorNotice(error));
    }
  };
  root.append(h("h2", {}, "Plans"),
    h("form", { class: "card", "aria-label": "Filter plans", onsubmit: (event: Event) => { event.preventDefault(); void load(null); } },
      h("div", { class: "row" }, field("Status", status)), h("button", { type: "submit" }, "List plans")),
    state,
    h("div", { class: "table-wrap" }, h("table", { "data-testid": "plans" },
      h("caption", { class: "c2-caption" }, "Your plans"),
      h("thead", {}, h("tr", {}, ["Plan", "Goal event", "Status", "Updated", "Version"].map((t) => h("th", { scope: "col" }, t)))),
      body)),
    more);
  void load(null);
}

async function showPlan(root: HTMLElement, ctx: Context, planId: string): Promise<void> {
  const id = encodeURIComponent(planId);
  const head = h("div");
  root.append(h("p", {}, h("a", { href: "#/workflow" }, "All plans")), head);
  await loadInto(head, async () => {
    const plan = await ctx.api.get<Plan>(`/v1/memory/plans/${id}`);
    return [h("h2", {}, `Plan ${plan.plan_id}`),
      detailsTable("The plan", [["Status", plan.status], ["Goal event", plan.goal_event], ["Goal data", plan.goal_data],
        ["State", plan.state], ["Version", plan.version], ["Created", plan.created_at], ["Updated", plan.updated_at]])];
  });
  const working = h("div", { "data-testid": "working-memory" });
  const more = h("div");
  const entries: WorkingValue[] = [];
  root.append(h("h2", {}, "Working memory"), working, more);
  const load = async (cursor: string | null): Promise<void> => {
    try {
      const page = await ctx.api.get<{ items: WorkingValue[]; next_cursor: string | null }>(`/v1/memory/working/${id}`, { limit: WORKING_PAGE, cursor });
      entries.push(...page.items);
      replace(working, entries.length
        ? table(`Working memory of ${planId}`, ["Key", "Value", "Version", "Updated", "Expires"], entries.map((entry) => [
          h("code", {}, entry.key), h("pre", { class: "c2-json" }, pretty(entry.value)), String(entry.version), entry.updated_at, entry.expires_at ?? "never"]))
        : notice("This plan has no working memory."));
      replace(more, page.next_cursor ? moreButton("More entries", () => load(page.next_cursor)) : null);
    } catch (error) {
      replace(working, errorNotice(error));
    }
  };
  await load(null);
}
