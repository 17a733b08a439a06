/**
 * Building the page. Every text goes in through `textContent` or an attribute, never through
 * HTML parsing, so a stored value that holds markup or a script is shown as text and never runs.
 * The CSP (no inline scripts or styles) is the second wall; this is the first.
 */

export type Child = Node | string | number | null | undefined | false | Child[];
export type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

/** `h("button", {type: "button", onclick: f}, "Save")`: an element; `on*` attributes become listeners. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === "function") {
      if (!name.startsWith("on")) throw new Error(`${name}: only an on* attribute takes a function`);
      el.addEventListener(name.slice(2), value);
    } else if (name === "style") {
      throw new Error("inline styles are refused by the CSP: use a class");
    } else {
      setAttribute(el, name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** An SVG element (the graph); same rules as `h`. */
export function svg(tag: string, attrs: Record<string, string | number> = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs)) setAttribute(el, name, String(value));
  append(el, children);
  return el;
}

/** Attributes whose value the browser follows or loads: only the console's own `#` addresses. */
const URL_ATTRIBUTES = new Set(["href", "xlink:href", "src", "action", "formaction"]);

/**
 * The one way an attribute is set. Text that reaches an inline handler would be code, and a URL
 * attribute could hold `javascript:`: both are refused here whatever built the value.
 */
function setAttribute(el: Element, name: string, value: string): void {
  const lower = name.toLowerCase();
  if (lower.startsWith("on")) throw new Error(`${name}: a handler is a function, never text`);
  if (URL_ATTRIBUTES.has(lower) && !value.startsWith("#")) throw new Error(`${name}: links go to the console's own # routes`);
  el.setAttribute(name, value);
}

export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Empties `el` and puts `children` in it. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** A JSON value as indented text, for a <pre>. */
export function pretty(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** A labelled form field: the label's `for` names the control, so screen readers and tests find it by its label. */
export function field(label: string, control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, hint?: string): HTMLElement {
  if (!control.id) control.id = `f-${label.toLowerCase().replace(/[^a-z0-9]+/g, "-")}-${++fieldCount}`;
  return h("div", { class: "field" },
    h("label", { for: control.id }, label),
    control,
    hint ? h("small", { class: "hint" }, hint) : null);
}
let fieldCount = 0;

/** A status line for errors and notes, announced to screen readers. */
export function notice(text: string, kind: "error" | "info" = "info"): HTMLElement {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

/**
 * A table with column headers, named by `label`: shown as its caption when `caption` is set, else
 * only its accessible name. `numeric` names the columns whose cells align as numbers.
 */
export function table(label: string, headers: string[], rows: Child[][],
  { numeric = [], caption = false, attrs = {} }: { numeric?: number[]; caption?: boolean; attrs?: Attrs } = {}): HTMLElement {
  const cellClass = (index: number) => (numeric.includes(index) ? "num" : null);
  return h("div", { class: "table-wrap" },
    h("table", { ...attrs, "aria-label": caption ? null : label },
      caption ? h("caption", { class: "c2-caption" }, label) : null,
      h("thead", {}, h("tr", {}, headers.map((text, i) => h("th", { scope: "col", class: cellClass(i) }, text)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell, i) => h("td", { class: cellClass(i) }, cell)))))));
}

/** Two-column facts (name, value) as a description list. */
export function facts(entries: [string, Child][]): HTMLElement {
  return h("dl", { class: "facts" }, entries.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
}

/** A value as one line of compact JSON, cut to `max` characters: a list's preview, never markup. */
export function preview(value: unknown, max = 120): string {
  const text = typeof value === "string" ? value : JSON.stringify(value) ?? "";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A score or weight: three decimals; a dash for "no score" (null: that signal did not find it). */
export function score(value: number | null | undefined, digits = 3): string {
  return typeof value === "number" ? value.toFixed(digits) : "—";
}

/** An RFC 3339 time as the API gave it, in a <time> element; a dash when absent. */
export function time(iso: string | null | undefined): HTMLElement | string {
  return iso ? h("time", { datetime: iso }, iso) : "—";
}
