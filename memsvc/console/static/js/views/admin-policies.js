import { ApiError, errorText } from "../api.js";
import { field, h, notice, replace } from "../dom.js";
export const adminPoliciesView = {
    path: "admin/policies",
    title: "Policies",
    inMenu: true,
    admin: true,
    async render(root, ctx) {
        const bundle = await ctx.api.get("/admin/v1/memories/policies");
        new PolicyPage(root, ctx, bundle).start();
    },
};
class PolicyPage {
    root;
    ctx;
    bundle;
    editors = [];
    result = h("div", { "aria-live": "polite", "data-testid": "policy-result" });
    version = h("p", { class: "muted" });
    constructor(root, ctx, bundle) {
        this.root = root;
        this.ctx = ctx;
        this.bundle = bundle;
    }
    start() {
        this.version.textContent = `Version in force: ${this.bundle.version}`;
        const files = h("div");
        for (const name of Object.keys(this.bundle.policies).sort()) {
            const editor = makeEditor(name, this.bundle.policies[name]);
            this.editors.push(editor);
            files.append(editor.card);
        }
        const validate = h("button", { type: "button", onclick: () => void this.send(true) }, "Validate");
        const upload = h("button", { type: "button", class: "secondary", onclick: () => void this.send(false) }, "Upload");
        this.root.append(this.version, h("p", { class: "hint" }, "Validate compiles and test-evaluates the bundle without storing it; Upload replaces the tenant's bundle."), h("div", { class: "row c2-actions" }, validate, upload), this.result, files);
    }
    async send(dryRun) {
        for (const editor of this.editors)
            markLine(editor, null);
        replace(this.result, notice(dryRun ? "Validating…" : "Uploading…"));
        const policies = Object.fromEntries(this.editors.map((e) => [e.name, e.text.value]));
        // The version this page loaded: an upload over another admin's newer bundle is refused (412).
        const body = { version: this.bundle.version, policies };
        try {
            if (dryRun) {
                await this.ctx.api.put("/admin/v1/memories/policies", body, { dry_run: true });
                replace(this.result, notice("Valid: the bundle compiles and evaluates. Nothing was stored."));
            }
            else {
                this.bundle = await this.ctx.api.put("/admin/v1/memories/policies", body);
                this.version.textContent = `Version in force: ${this.bundle.version}`;
                replace(this.result, notice(`Uploaded: version ${this.bundle.version} is in force.`));
            }
        }
        catch (error) {
            this.showError(error);
        }
    }
    /** The service's 400 names the file, line and column: say so, mark the line and put the caret there. */
    showError(error) {
        const details = error instanceof ApiError ? error.envelope.details : {};
        const file = typeof details.policy_file === "string" ? details.policy_file : null;
        const line = typeof details.line === "number" ? details.line : null;
        const column = typeof details.column === "number" ? details.column : null;
        const where = [file, line !== null ? `line ${line}` : null, column !== null ? `column ${column}` : null].filter(Boolean).join(", ");
        replace(this.result, h("div", { class: "notice error", role: "alert" }, where ? h("p", { class: "c2-where", "data-testid": "policy-error-where" }, where) : null, h("p", {}, errorText(error))));
        const editor = this.editors.find((e) => e.name === file);
        if (!editor)
            return;
        markLine(editor, line);
        if (line !== null)
            placeCaret(editor, line, column ?? 1);
    }
}
function makeEditor(name, source) {
    const text = h("textarea", { spellcheck: "false", wrap: "off", rows: 24, "data-file": name, "aria-describedby": `caret-${name}` });
    text.value = source;
    text.setSelectionRange(0, 0);
    const gutter = h("div", { class: "c2-gutter", "aria-hidden": "true" });
    const caret = h("p", { class: "muted c2-caret", id: `caret-${name}`, "aria-live": "polite" });
    const card = h("section", { class: "card c2-policy", "data-file": name, "aria-label": name });
    const editor = { name, card, text, gutter, caret };
    const refresh = () => { renumber(editor); readCaret(editor); };
    text.addEventListener("input", refresh);
    text.addEventListener("keyup", () => readCaret(editor));
    text.addEventListener("click", () => readCaret(editor));
    text.addEventListener("scroll", () => { gutter.scrollTop = text.scrollTop; });
    const control = field(name, text);
    card.append(h("div", { class: "c2-editor" }, gutter, control), caret);
    refresh();
    return editor;
}
/** One number per line of the source; the line with an error gets a marker class. */
function renumber(editor) {
    const lines = editor.text.value.split("\n").length;
    const marked = Number(editor.card.getAttribute("data-error-line") ?? "0");
    editor.gutter.replaceChildren(...Array.from({ length: lines }, (_, i) => h("span", { class: i + 1 === marked ? "c2-error-line" : "" }, String(i + 1))));
}
function markLine(editor, line) {
    if (line === null) {
        editor.card.removeAttribute("data-error-line");
        editor.card.classList.remove("c2-has-error");
        editor.text.removeAttribute("aria-invalid");
    }
    else {
        editor.card.setAttribute("data-error-line", String(line));
        editor.card.classList.add("c2-has-error");
        editor.text.setAttribute("aria-invalid", "true");
    }
    renumber(editor);
}
/** Puts the caret at `line`:`column` (1-based) and scrolls it into view. */
function placeCaret(editor, line, column) {
    const lines = editor.text.value.split("\n");
    const row = Math.min(Math.max(line, 1), lines.length);
    let offset = 0;
    for (let i = 0; i < row - 1; i += 1)
        offset += lines[i].length + 1;
    offset += Math.min(Math.max(column, 1) - 1, lines[row - 1].length);
    editor.text.focus();
    editor.text.setSelectionRange(offset, offset);
    const lineHeight = editor.text.scrollHeight / Math.max(lines.length, 1);
    editor.text.scrollTop = Math.max(0, (row - 3) * lineHeight);
    readCaret(editor);
}
function readCaret(editor) {
    const before = editor.text.value.slice(0, editor.text.selectionStart);
    const line = before.split("\n").length;
    const column = before.length - before.lastIndexOf("\n");
    editor.caret.textContent = `${editor.name}: line ${line}, column ${column}`;
}
