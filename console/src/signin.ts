/**
 * Signing in: paste a token; on `memsvc serve` from this machine, "sign in as" (the loopback
 * helper, POST /console/sign-in); on AWS, Cognito's hosted UI with the authorization code and PKCE.
 */

import type { CognitoAuth, ConsoleConfig } from "./context.js";
import { field, h, notice, replace } from "./dom.js";
import { signIn, signOut } from "./session.js";

const VERIFIER_KEY = "memsvc.console.pkce";
/** What the hosted UI adds to the redirect URI: any of them makes the page a callback. */
const CALLBACK_PARAMETERS = ["code", "state", "error", "error_description"];
/** RFC 6749's error codes are of these characters; anything else in `error` is not one. */
const OAUTH_ERROR_CODE = /^[a-z_]{1,64}$/;

export function renderSignIn(app: HTMLElement, config: ConsoleConfig, done: () => void, error?: string): void {
  const tokenInput = h("textarea", { id: "token", rows: 4, autocomplete: "off", spellcheck: "false" });
  const pasteStatus = h("div");
  const pasted = h("form", { class: "card", "aria-labelledby": "paste-title" },
    h("h2", { id: "paste-title" }, "Paste a token"),
    field("Bearer token", tokenInput, "From `memsvc token --sub <you>`, or your identity provider."),
    h("button", { type: "submit" }, "Sign in"), pasteStatus);
  pasted.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = tokenInput.value.trim().replace(/^Bearer\s+/i, "");
    if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(value)) {
      replace(pasteStatus, notice("That is not a JWT: three base64url parts joined by dots.", "error"));
      return;
    }
    signIn(value);
    done();
  });

  const parts: HTMLElement[] = [h("h1", {}, "Sign in to memsvc")];
  if (error) parts.push(notice(error, "error"));
  if (config.auth.mode === "cognito") {
    const auth = config.auth;
    parts.push(h("div", { class: "card" },
      h("button", { type: "button", onclick: () => void startCognitoSignIn(auth) }, "Sign in with your organisation")));
  } else if (config.auth.sign_in_helper) {
    parts.push(signInAs(done));
  }
  parts.push(pasted);
  replace(app, h("main", { id: "main", class: "signin" }, parts));
}

function signInAs(done: () => void): HTMLElement {
  const sub = h("input", { id: "as-sub", value: "alice", required: true, autocomplete: "off" });
  const tenant = h("input", { id: "as-tenant", value: "", placeholder: "default", autocomplete: "off" });
  const roles = h("input", { id: "as-roles", value: "", placeholder: "admin", autocomplete: "off" });
  const projects = h("input", { id: "as-projects", value: "", autocomplete: "off" });
  const teams = h("input", { id: "as-teams", value: "", autocomplete: "off" });
  const orgs = h("input", { id: "as-orgs", value: "", autocomplete: "off" });
  const status = h("div");
  const form = h("form", { class: "card", "aria-labelledby": "as-title" },
    h("h2", { id: "as-title" }, "Sign in as"),
    h("p", {}, "Offered only by memsvc serve, to a browser on this machine."),
    field("User (sub)", sub), field("Tenant", tenant, "Empty: the default tenant."),
    field("Roles", roles, "Comma-separated, e.g. admin."),
    h("div", { class: "row" },
      field("Projects", projects, "Comma-separated ids."), field("Teams", teams, "Comma-separated ids."),
      field("Orgs", orgs, "Comma-separated ids.")),
    h("button", { type: "submit" }, "Sign in as this user"), status);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {
      sub: sub.value.trim(),
      tenant: tenant.value.trim() || null,
      roles: list(roles.value),
      projects: list(projects.value),
      teams: list(teams.value),
      orgs: list(orgs.value),
    };
    replace(status, h("p", { role: "status" }, "Signing in…"));
    let response: Response;
    try {
      response = await fetch("sign-in", {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), credentials: "omit",
      });
    } catch {
      replace(status, notice("The service did not answer.", "error"));
      return;
    }
    if (!response.ok) {
      let message = `Signing in failed (HTTP ${response.status}).`;
      try { message = (await response.json()).error.message; } catch { /* not the envelope: keep ours */ }
      replace(status, notice(message, "error"));
      return;
    }
    signIn((await response.json()).token);
    done();
  });
  return form;
}

/**
 * Forgets the token, then starts afresh. On Cognito it also ends the hosted UI's own session,
 * which would otherwise sign the next person at this browser straight back in as this one.
 */
export function signOutOf(config: ConsoleConfig): void {
  signOut();
  if (config.auth.mode === "cognito") {
    const query = new URLSearchParams({ client_id: config.auth.client_id, logout_uri: config.auth.redirect_uri });
    location.assign(`https://${config.auth.domain}/logout?${query}`);
    return;
  }
  location.hash = "";
  location.reload();
}

function list(text: string): string[] {
  return text.split(",").map((item) => item.trim()).filter(Boolean);
}

async function startCognitoSignIn(auth: CognitoAuth): Promise<void> {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
  sessionStorage.setItem(VERIFIER_KEY, JSON.stringify({ verifier, state }));
  const query = new URLSearchParams({
    response_type: "code", client_id: auth.client_id, redirect_uri: auth.redirect_uri,
    scope: auth.scopes.join(" "), state, code_challenge: challenge, code_challenge_method: "S256",
  });
  location.assign(`https://${auth.domain}/oauth2/authorize?${query}`);
}

/**
 * Back from the hosted UI with `?code=&state=`: exchange the code, then drop it from the address
 * bar. Answers what went wrong, for the sign-in page to show, or null.
 */
export async function completeCognitoSignIn(config: ConsoleConfig): Promise<string | null> {
  if (config.auth.mode !== "cognito") return null;
  const query = new URLSearchParams(location.search);
  if (!CALLBACK_PARAMETERS.some((name) => query.has(name))) return null;
  // Whatever the answer, the code leaves the address bar and the verifier is used at most once.
  const saved = sessionStorage.getItem(VERIFIER_KEY);
  sessionStorage.removeItem(VERIFIER_KEY);
  history.replaceState(null, "", location.pathname + location.hash);
  const error = query.get("error");
  if (error !== null) {
    // The address can be anyone's link: only an OAuth error code is repeated, never free text.
    return OAUTH_ERROR_CODE.test(error)
      ? `The identity provider refused the sign-in (${error}).`
      : "The identity provider refused the sign-in.";
  }
  const code = query.get("code");
  const request = savedRequest(saved);
  if (!code || !request) return "This sign-in answer was not asked for by this tab: sign in again.";
  const { verifier, state } = request;
  if (query.get("state") !== state) return "The sign-in answer did not match the request: sign in again.";
  let response: Response;
  try {
    response = await fetch(`https://${config.auth.domain}/oauth2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code", client_id: config.auth.client_id, code,
        redirect_uri: config.auth.redirect_uri, code_verifier: verifier,
      }),
      credentials: "omit",
    });
  } catch {
    return "The identity provider did not answer.";
  }
  if (!response.ok) return `The identity provider refused the code (HTTP ${response.status}): sign in again.`;
  let tokens: { id_token?: unknown; access_token?: unknown };
  try {
    tokens = await response.json();
  } catch {
    return "The identity provider sent no token.";
  }
  const chosen = config.auth.token === "access" ? tokens?.access_token : tokens?.id_token;
  if (typeof chosen !== "string" || !chosen) return "The identity provider sent no token.";
  signIn(chosen);
  return null;
}

/** The verifier and state this tab saved before leaving for the hosted UI, or null. */
function savedRequest(saved: string | null): { verifier: string; state: string } | null {
  if (!saved) return null;
  try {
    const { verifier, state } = JSON.parse(saved) as { verifier?: unknown; state?: unknown };
    return typeof verifier === "string" && typeof state === "string" ? { verifier, state } : null;
  } catch {
    return null;
  }
}

function base64url(bytes: Uint8Array): string {
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
