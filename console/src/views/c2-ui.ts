/** Small pieces the views share: built with dom.ts, never from HTML. */

import { errorText, memoryHref } from "../api.js";
import { h, notice, pretty, replace, table as domTable, type Child } from "../dom.js";

export function memoryLink(namespace: string[], key: string): HTMLAnchorElement {
  return h("a", { href: memoryHref(namespace, key) }, `${namespace.join(" / ")} : ${key}`);
}

export function errorNotice(error: unknown): HTMLElement {
  return notice(errorText(error), "error");
}

export function button(label: string, onclick: () => void, attrs: Record<string, string> = {}): HTMLButtonElement {
  return h("button", { type: "button", ...attrs, onclick: () => onclick() }, label);
}

/** A "More …" button, disabled while its page loads, so a double click cannot add that page twice. */
export function moreButton(label: string, load: () => Promise<void>): HTMLButtonElement {
  const el = h("button", { type: "button" }, label);
  el.addEventListener("click", async () => {
    el.disabled = true;
    try {
      await load();
    } finally {
      el.disabled = false;
    }
  });
  return el;
}

/** A two-column table of named values; objects are shown as indented JSON. */
export function detailsTable(caption: string, rows: [string, unknown][]): HTMLElement {
  return h("div", { class: "table-wrap" },
    h("table", {},
      h("caption", { class: "c2-caption" }, caption),
      h("tbody", {}, rows.map(([name, value]) =>
        h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, valueCell(value)))))));
}

function valueCell(value: unknown): Child {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "—");
  if (typeof value === "object") return h("pre", { class: "c2-json" }, pretty(value));
  return String(value);
}

/** A table with a header row, its caption shown above it (dom.ts's table, captioned). */
export function table(caption: string, headers: string[], rows: Child[][], attrs: Record<string, string> = {}): HTMLElement {
  return domTable(caption, headers, rows, { caption: true, attrs });
}

/** Runs `load` and shows its result in `target`, or the error; the busy state is announced. */
export async function loadInto(target: HTMLElement, load: () => Promise<Child>): Promise<void> {
  target.setAttribute("aria-busy", "true");
  try {
    replace(target, await load());
  } catch (error) {
    target.replaceChildren(errorNotice(error));
  } finally {
    target.removeAttribute("aria-busy");
  }
}
