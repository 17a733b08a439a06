import { ApiError, errorText } from "../api.js";
import type { Context, View } from "../context.js";
import { append, field, h, notice, pretty, replace } from "../dom.js";

/** The part of a JSON Schema (as /openapi.json states the settings) that the form reads. */
interface Schema {
  $ref?: string;
  type?: string;
  anyOf?: Schema[];
  enum?: string[];
  items?: Schema;
  properties?: Record<string, Schema>;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  description?: string;
  title?: string;
}

interface OpenApi {
  paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> };
    responses?: Record<string, { content?: Record<string, { schema: Schema }> }> }>>;
  components: { schemas: Record<string, Schema> };
}

type Settings = Record<string, unknown>;

/** One editable setting: reads its control, says what is wrong with it, or null. */
interface SettingField {
  path: string[];
  read(): unknown;
  problem(): string | null;
  error: HTMLElement;
  control: HTMLElement;
}

const SETTINGS_PATH = "/admin/v1/memories/settings";

export const adminSettingsView: View = {
  path: "admin/settings",
  title: "Settings",
  inMenu: true,
  admin: true,
  async render(root, ctx) {
    const [openapi, current] = await Promise.all([
      ctx.api.get<OpenApi>("/openapi.json"),
      ctx.api.get<Settings>(SETTINGS_PATH),
    ]);
    new SettingsForm(root, ctx, openapi, current).start();
  },
};

class SettingsForm {
  private readonly fields: SettingField[] = [];
  private readonly result = h("div", { "aria-live": "polite", "data-testid": "settings-result" });

  constructor(private readonly root: HTMLElement, private readonly ctx: Context, private readonly openapi: OpenApi,
              private current: Settings) {}

  start(): void {
    const operation = this.openapi.paths[SETTINGS_PATH];
    const body = this.resolve(operation?.put?.requestBody?.content["application/json"]?.schema ?? {});
    const shown = this.resolve(operation?.get?.responses?.["200"]?.content?.["application/json"]?.schema ?? {});
    const form = h("form", { class: "c2-settings", "aria-label": "Tenant settings", novalidate: true, onsubmit: (event: Event) => { event.preventDefault(); void this.save(); } });
    for (const [name, schema] of Object.entries(body.properties ?? {})) {
      form.append(this.section([name], schema, shown.properties?.[name]));
    }
    const readOnly = Object.keys(shown.properties ?? {}).filter((name) => !(name in (body.properties ?? {})));
    form.append(h("div", { class: "row c2-actions" }, h("button", { type: "submit" }, "Save changes")), this.result);
    append(this.root, [
      h("p", { class: "hint" }, "Ranges and descriptions come from the service's OpenAPI document. Only changed settings are sent."),
      readOnly.length ? h("p", { class: "muted" }, readOnly.map((name) => `${name}: ${JSON.stringify(this.current[name])} (not settable)`).join("; ")) : null,
      form]);
  }

  private resolve(schema: Schema): Schema {
    if (schema.$ref) {
      const target = this.openapi.components.schemas[schema.$ref.split("/").pop() ?? ""] ?? {};
      return { ...target, ...schema, $ref: undefined, description: schema.description ?? target.description };
    }
    const nonNull = schema.anyOf?.filter((s) => s.type !== "null");
    if (nonNull?.length === 1) return { ...this.resolve(nonNull[0]), description: schema.description, title: schema.title };
    return schema;
  }

  /** A setting's control, or a fieldset of controls for an object setting (sent whole). */
  private section(path: string[], raw: Schema, shownRaw: Schema | undefined): HTMLElement {
    const schema = this.resolve(raw);
    const shown = shownRaw ? this.resolve(shownRaw) : undefined;
    const description = shown?.description ?? schema.description ?? "";
    if (schema.type === "object" && schema.properties) {
      return h("fieldset", { class: "card c2-fieldset" },
        h("legend", {}, path.join(".")),
        description ? h("p", { class: "hint" }, description) : null,
        Object.entries(schema.properties).map(([name, sub]) => this.section([...path, name], sub, shown?.properties?.[name] ?? sub)));
    }
    const nullable = (raw.anyOf ?? []).some((s) => s.type === "null");
    const value = valueAt(this.current, path);
    const setting = control(path, schema, value, nullable);
    const hint = [range(schema), description, nullable ? "Empty: none." : ""].filter(Boolean).join(" ");
    const wrapper = setting.control instanceof HTMLInputElement || setting.control instanceof HTMLSelectElement || setting.control instanceof HTMLTextAreaElement
      ? field(path.join("."), setting.control, hint)
      : h("fieldset", { class: "field c2-choices" }, h("legend", {}, path.join(".")), setting.control, h("small", { class: "hint" }, hint));
    wrapper.append(setting.error);
    this.fields.push(setting);
    const check = (): void => { showProblem(setting); };
    setting.control.addEventListener("input", check);
    setting.control.addEventListener("change", check);
    return wrapper;
  }

  private async save(): Promise<void> {
    const invalid = this.fields.filter((f) => showProblem(f) !== null);
    if (invalid.length) {
      replace(this.result, notice(`Not sent: ${invalid.length} value${invalid.length === 1 ? " is" : "s are"} out of range (marked above).`, "error"));
      invalid[0].control.focus();
      return;
    }
    const changes: Settings = {};
    for (const setting of this.fields) {
      const top = setting.path[0];
      if (JSON.stringify(setting.read()) === JSON.stringify(valueAt(this.current, setting.path))) continue;
      changes[top] = setting.path.length === 1 ? setting.read() : this.objectOf(top);
    }
    if (!Object.keys(changes).length) {
      replace(this.result, notice("Nothing changed."));
      return;
    }
    replace(this.result, notice("Saving…"));
    try {
      this.current = await this.ctx.api.put<Settings>(SETTINGS_PATH, changes);
      replace(this.result, notice(`Saved: ${Object.keys(changes).join(", ")}.`));
    } catch (error) {
      const details = error instanceof ApiError && Object.keys(error.envelope.details).length ? pretty(error.envelope.details) : null;
      replace(this.result, h("div", { class: "notice error", role: "alert" }, h("p", {}, errorText(error)), details ? h("pre", {}, details) : null));
    }
  }

  /** An object setting is replaced as a whole: every one of its fields as the form has them. */
  private objectOf(top: string): Settings {
    const whole: Settings = { ...(this.current[top] as Settings | undefined) };
    for (const setting of this.fields) if (setting.path[0] === top && setting.path.length === 2) whole[setting.path[1]] = setting.read();
    return whole;
  }
}

function valueAt(settings: Settings, path: string[]): unknown {
  let value: unknown = settings;
  for (const part of path) value = value && typeof value === "object" ? (value as Settings)[part] : undefined;
  return value;
}

/** "1 to 32.", "0 to below 1.", "One of user, agent." */
function range(schema: Schema): string {
  if (schema.enum) return `One of ${schema.enum.join(", ")}.`;
  if (schema.type === "array" && schema.items?.enum) return `Any of ${schema.items.enum.join(", ")}.`;
  const low = schema.minimum !== undefined ? `${schema.minimum}` : schema.exclusiveMinimum !== undefined ? `above ${schema.exclusiveMinimum}` : null;
  const high = schema.maximum !== undefined ? `${schema.maximum}` : schema.exclusiveMaximum !== undefined ? `below ${schema.exclusiveMaximum}` : null;
  const kind = schema.type === "integer" ? "A whole number" : schema.type === "number" ? "A number" : "";
  if (low !== null && high !== null) return `${kind ? `${kind}, ` : ""}${low} to ${high}.`;
  if (low !== null) return `${kind ? `${kind}, ` : ""}at least ${low}.`;
  if (high !== null) return `${kind ? `${kind}, ` : ""}at most ${high}.`;
  if (schema.maxLength !== undefined) return `${schema.minLength ?? 0} to ${schema.maxLength} characters.`;
  return kind ? `${kind}.` : "";
}

/** What is wrong with `value` under `schema`, in words that name the allowed range; null when nothing. */
function problemWith(schema: Schema, value: unknown): string | null {
  if (schema.type === "integer" || schema.type === "number") {
    if (typeof value !== "number" || !Number.isFinite(value)) return `Not a number. ${range(schema)}`;
    if (schema.type === "integer" && !Number.isInteger(value)) return `Not a whole number. ${range(schema)}`;
    const outside = (schema.minimum !== undefined && value < schema.minimum) || (schema.maximum !== undefined && value > schema.maximum)
      || (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum)
      || (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum);
    return outside ? `Out of range: ${range(schema)}` : null;
  }
  if (schema.type === "string" && typeof value === "string") {
    if (schema.enum && !schema.enum.includes(value)) return range(schema);
    if ((schema.minLength !== undefined && value.length < schema.minLength) || (schema.maxLength !== undefined && value.length > schema.maxLength)) return range(schema);
    if (schema.pattern && !new RegExp(schema.pattern, "u").test(value)) return "Holds characters this setting does not take.";
  }
  return null;
}

function control(path: string[], schema: Schema, value: unknown, nullable: boolean): SettingField {
  const error = h("small", { class: "c2-field-error", role: "alert" });
  const name = path.join(".");
  if (schema.type === "boolean") {
    const box = h("input", { type: "checkbox", "data-setting": name });
    box.checked = value === true;
    return { path, control: box, error, read: () => box.checked, problem: () => null };
  }
  if (schema.enum) {
    const select = h("select", { "data-setting": name }, schema.enum.map((option) => h("option", { value: option }, option)));
    select.value = String(value ?? schema.enum[0]);
    return { path, control: select, error, read: () => select.value, problem: () => null };
  }
  if (schema.type === "array" && schema.items?.enum) {
    const chosen = new Set(Array.isArray(value) ? value.map(String) : []);
    const boxes = schema.items.enum.map((option) => {
      const box = h("input", { type: "checkbox", value: option, id: `setting-${name}-${option}` });
      box.checked = chosen.has(option);
      return box;
    });
    const group = h("div", { class: "row", "data-setting": name },
      boxes.map((box) => h("label", { for: box.id, class: "c2-choice" }, box, ` ${box.value}`)));
    return { path, control: group, error, read: () => boxes.filter((b) => b.checked).map((b) => b.value), problem: () => null };
  }
  if (schema.type === "integer" || schema.type === "number") {
    const input = h("input", { type: "number", step: schema.type === "integer" ? "1" : "any", inputmode: "decimal", "data-setting": name,
      min: schema.minimum, max: schema.maximum });
    input.value = value === undefined || value === null ? "" : String(value);
    const read = (): unknown => (input.value.trim() === "" ? (nullable ? null : Number.NaN) : Number(input.value));
    return { path, control: input, error, read, problem: () => (nullable && read() === null ? null : problemWith(schema, read())) };
  }
  if (schema.type === "string") {
    const input = h("input", { type: "text", autocomplete: "off", "data-setting": name });
    input.value = typeof value === "string" ? value : "";
    const read = (): unknown => (nullable && input.value === "" ? null : input.value);
    return { path, control: input, error, read, problem: () => (read() === null ? null : problemWith(schema, read())) };
  }
  const text = h("textarea", { rows: 3, "data-setting": name });
  text.value = pretty(value ?? null);
  const read = (): unknown => { try { return JSON.parse(text.value); } catch { return undefined; } };
  return { path, control: text, error, read, problem: () => (read() === undefined ? "Not JSON." : null) };
}

/** Shows (or clears) the field's problem beside it; answers it. */
function showProblem(setting: SettingField): string | null {
  const problem = setting.problem();
  setting.error.textContent = problem ?? "";
  if (problem) setting.control.setAttribute("aria-invalid", "true");
  else setting.control.removeAttribute("aria-invalid");
  return problem;
}
