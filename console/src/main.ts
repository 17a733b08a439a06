/**
 * The console's shell: loads config.json, signs in, asks who the caller is, then draws the view the
 * location's hash names (`#/memories`, `#/memory?ns=...&key=...`). Views come from views/index.ts.
 */

import { Api, ApiError, errorText } from "./api.js";
import type { ConsoleConfig, Context, Identity, View } from "./context.js";
import { h, notice, replace } from "./dom.js";
import { renderSignIn, completeCognitoSignIn, signOutOf } from "./signin.js";
import { signOut, token } from "./session.js";
import { ViewSwitch, type Leave } from "./view-switch.js";
import { VIEWS } from "./views/index.js";

const ADMIN_ROLES = new Set(["admin", "service"]);

async function boot(): Promise<void> {
  const app = document.getElementById("app");
  if (!app) return;
  let config: ConsoleConfig;
  try {
    const response = await fetch("config.json", { cache: "no-store", credentials: "omit" });
    if (!response.ok) throw new Error("no config");
    config = (await response.json()) as ConsoleConfig;
  } catch {
    replace(app, notice("The console could not load its configuration (config.json).", "error"));
    return;
  }
  const signInError = await completeCognitoSignIn(config);
  const api = new Api(config.api_base, token);
  if (!token()) {
    renderSignIn(app, config, () => void boot(), signInError ?? undefined);
    return;
  }
  let identity: Identity;
  try {
    identity = await api.get<Identity>("/v1/identity");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      signOut();
      renderSignIn(app, config, () => void boot(), error.message);
    } else {
      // The service did not refuse the token (it did not answer, or failed): keep it for another try.
      replace(app, h("main", { id: "main", class: "signin" },
        h("h1", {}, "memsvc console"),
        notice(errorText(error), "error"),
        h("button", { type: "button", onclick: () => void boot() }, "Try again")));
    }
    return;
  }
  const shell = new Shell(app, api, config, identity);
  api.onUnauthorized = (error) => shell.end(`Signed out: ${error.message}`);
  shell.start();
}

class Shell {
  private readonly main = h("main", { id: "main", tabindex: "-1" });
  private readonly views = new ViewSwitch();
  private readonly isAdmin: boolean;

  constructor(private readonly app: HTMLElement, private readonly api: Api, private readonly config: ConsoleConfig,
              private readonly identity: Identity) {
    this.isAdmin = identity.roles.some((role) => ADMIN_ROLES.has(role));
  }

  start(): void {
    const menu = VIEWS.filter((view) => view.inMenu && (!view.admin || this.isAdmin));
    replace(this.app,
      // The hash names the view, so the skip link moves focus itself instead of going to `#main`.
      h("a", { class: "skip", href: "#main", onclick: (event: Event) => { event.preventDefault(); this.main.focus(); } }, "Skip to content"),
      h("header", { class: "top" },
        h("span", { class: "brand" }, "memsvc console"),
        h("span", { class: "who", "data-testid": "who" },
          `${this.identity.user_id} @ ${this.identity.tenant_id}`,
          this.identity.roles.length ? ` (${this.identity.roles.join(", ")})` : ""),
        h("button", { type: "button", class: "link", onclick: () => signOutOf(this.config) }, "Sign out")),
      h("nav", { "aria-label": "Views" },
        h("ul", {}, menu.map((view) => h("li", {}, h("a", { href: `#/${view.path}`, "data-path": view.path }, view.title))))),
      this.main);
    window.addEventListener("hashchange", this.onHashChange);
    void this.show();
  }

  /** The token is no longer accepted (it expired): stop the view on screen and sign in again. */
  end(message: string): void {
    if (this.ended) return; // several calls in flight may each be refused
    this.ended = true;
    window.removeEventListener("hashchange", this.onHashChange);
    void this.views.enter(() => undefined);
    signOut();
    renderSignIn(this.app, this.config, () => void boot(), message);
  }

  // Going to another view moves focus to its content, so keyboard and screen-reader users land there.
  private readonly onHashChange = (): void => void this.show(true);
  private ended = false;

  private async show(moveFocus = false): Promise<void> {
    const { path, params } = parseHash(location.hash);
    const view = VIEWS.find((v) => v.path === path) ?? VIEWS[0];
    try {
      await this.views.enter(() => this.draw(view, params, moveFocus));
    } catch (error) {
      this.main.append(notice(error instanceof ApiError ? `${error.envelope.code}: ${error.message}` : "Something went wrong drawing this view.", "error"));
    }
  }

  private draw(view: View, params: URLSearchParams, moveFocus: boolean): Promise<Leave> | Leave {
    for (const link of this.app.querySelectorAll("nav a")) {
      if (link.getAttribute("data-path") === view.path) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    replace(this.main, h("h1", {}, view.title));
    if (moveFocus) this.main.focus();
    document.title = `${view.title} · memsvc console`;
    if (view.admin && !this.isAdmin) {
      this.main.append(notice("This view is for admins.", "error"));
      return;
    }
    const ctx: Context = {
      api: this.api,
      config: this.config,
      identity: this.identity,
      isAdmin: this.isAdmin,
      params,
      navigate: (to, query) => { location.hash = `#/${to}${query ? `?${new URLSearchParams(query)}` : ""}`; },
    };
    return renderView(view, ctx, this.main);
  }
}

async function renderView(view: View, ctx: Context, main: HTMLElement): Promise<Leave> {
  const root = h("section", { class: `view view-${view.path.replace("/", "-")}` });
  main.append(root);
  return await view.render(root, ctx);
}

function parseHash(hash: string): { path: string; params: URLSearchParams } {
  const text = hash.replace(/^#\/?/, "");
  const [path, query = ""] = text.split("?", 2);
  return { path, params: new URLSearchParams(query) };
}

void boot();
