/** What every view is given: the API, the deployment's config, who is signed in, and navigation. */

import type { Api } from "./api.js";

export interface LocalAuth {
  mode: "local";
  /** True only when `memsvc serve` offers "sign in as" to this (loopback) browser. */
  sign_in_helper: boolean;
}

export interface CognitoAuth {
  mode: "cognito";
  domain: string;
  client_id: string;
  redirect_uri: string;
  scopes: string[];
  /** Which Cognito token the API's authorizer accepts: "id" or "access". */
  token?: "id" | "access";
}

/** `config.json` beside the page: written by `memsvc serve`, or at deploy time on AWS. */
export interface ConsoleConfig {
  api_base: string;
  auth: LocalAuth | CognitoAuth;
}

/** `GET /v1/identity`. */
export interface Identity {
  tenant_id: string;
  user_id: string;
  roles: string[];
  auth: "jwt" | "iam";
  claims: Record<string, unknown>;
}

export interface Context {
  api: Api;
  config: ConsoleConfig;
  identity: Identity;
  isAdmin: boolean;
  /** The current route's parameters (`#/memory?ns=...&key=...`). */
  params: URLSearchParams;
  /** Goes to another view: `navigate("memory", {ns: "[...]", key: "k"})`. */
  navigate(path: string, params?: Record<string, string>): void;
}

/** A view draws itself into `root`; what it returns is called when the user leaves it (stop polling, ...). */
export interface View {
  /** The route: `#/<path>`. */
  path: string;
  title: string;
  /** Shown in the navigation (a memory's page is reached from the list, not the menu). */
  inMenu: boolean;
  /** Only for `admin` (and `service`) callers; others never see it in the menu or reach it. */
  admin?: boolean;
  render(root: HTMLElement, ctx: Context): void | (() => void) | Promise<void | (() => void)>;
}
