/** Signing in: "sign in as" an admin and a plain user, and a pasted token; the page then says who you are. */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import { seeText, signInAs, skipReason, type World, withWorld } from "./harness.js";

const skip = skipReason();

describe("sign-in", { skip: skip ?? false }, () => {
  let world: World;
  withWorld((started) => { world = started; });

  it("signs in as an admin through 'sign in as' and shows who that is", async () => {
    const page = await world.page();
    await page.goto(`${world.url}/console/`);
    await world.screenshot(page, "signin");
    await signInAs(page, world.url, { sub: "ops", roles: ["admin"] });
    assert.equal(await page.getByTestId("who").textContent(), "ops @ default (admin)");
    await page.getByRole("link", { name: "Who am I" }).click();
    await page.getByTestId("identity-user").waitFor({ timeout: 30_000 });
    assert.equal(await page.getByTestId("identity-user").textContent(), "ops");
    assert.equal(await page.getByTestId("identity-tenant").textContent(), "default");
    assert.equal(await page.getByTestId("identity-roles").textContent(), "admin");
    assert.equal(await page.getByRole("cell", { name: "memsvc-local", exact: true }).count(), 1, "the iss claim is listed");
    const token = await page.evaluate(() => sessionStorage.getItem("memsvc.console.token"));
    assert.ok(token && token.split(".").length === 3, "the token is kept in sessionStorage");
    assert.equal(await page.evaluate(() => localStorage.length), 0, "nothing in localStorage");
    assert.ok(!page.url().includes(token), "the token is not in the address");
    const paths = await page.locator("#app > nav a").evaluateAll((links) => links.map((a) => a.getAttribute("data-path") ?? ""));
    assert.ok(paths.includes("admin/policies"), `an admin sees the admin views: ${paths}`);
    await world.screenshot(page, "identity-admin");
    assert.deepEqual(await world.problems(page), []);
  });

  it("signs out: the token leaves memory and sessionStorage, and the sign-in page is back", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "sam" });
    assert.ok(await page.evaluate(() => sessionStorage.getItem("memsvc.console.token")));
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to memsvc" }).waitFor({ timeout: 30_000 });
    assert.equal(await page.evaluate(() => sessionStorage.getItem("memsvc.console.token")), null);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, "nothing else of the session is kept");
    assert.equal(await page.getByTestId("who").count(), 0);
    assert.deepEqual(await world.problems(page), []);
  });

  it("goes back to sign-in when the service stops taking the token (it expired)", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "sam" });
    // The service's answer to an expired token, on the timeline's polling; the first check of the
    // token (GET /v1/identity) already passed, so only a view's own call can meet it.
    await page.route("**/v1/memories/events**", (route) => route.fulfill({
      status: 401, contentType: "application/json",
      body: JSON.stringify({ error: { code: "UNAUTHORIZED", message: "invalid token: expired", retryable: false, details: {} } }),
    }));
    await page.getByRole("link", { name: "Timeline" }).click();
    await page.getByRole("heading", { name: "Sign in to memsvc" }).waitFor({ timeout: 30_000 });
    await page.getByText("Signed out: invalid token: expired").waitFor({ timeout: 30_000 });
    assert.equal(await page.evaluate(() => sessionStorage.getItem("memsvc.console.token")), null);
    assert.equal(await page.getByTestId("who").count(), 0);
    await world.screenshot(page, "signin-expired");
  });

  it("going to another view moves focus to its content", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "sam" });
    await page.getByRole("link", { name: "Search and recall" }).click();
    await page.getByRole("heading", { name: "Search and recall", level: 1 }).waitFor({ timeout: 30_000 });
    assert.equal(await page.evaluate(() => document.activeElement?.id), "main");
  });

  it("the skip link moves focus to the content and stays on the view", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "sam" });
    await page.goto(`${world.url}/console/#/search`);
    await page.reload(); // a page opened at this address: focus starts at the top, not on the content
    await page.getByRole("heading", { name: "Search and recall", level: 1 }).waitFor({ timeout: 30_000 });
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Skip to content");
    await page.keyboard.press("Enter");
    assert.equal(new URL(page.url()).hash, "#/search", "the view named by the address is kept");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "main");
    assert.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Search and recall");
    assert.deepEqual(await world.problems(page), []);
  });

  it("signs in as a plain user, who sees no admin views", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "carol" });
    assert.equal(await page.getByTestId("who").textContent(), "carol @ default");
    await page.goto(`${world.url}/console/#/identity`);
    await page.getByTestId("identity-roles").waitFor({ timeout: 30_000 });
    assert.equal(await page.getByTestId("identity-roles").textContent(), "none");
    const paths = await page.locator("#app > nav a").evaluateAll((links) => links.map((a) => a.getAttribute("data-path") ?? ""));
    assert.deepEqual(paths.filter((p) => p.startsWith("admin/")), [], "no admin view in the menu");
    assert.deepEqual(await world.problems(page), []);
  });

  it("shows the sign-in helper's refusal of a bad tenant, and mints nothing", async () => {
    const page = await world.page();
    await page.goto(`${world.url}/console/`);
    await page.getByLabel("Tenant").fill("not a tenant!");
    await page.getByRole("button", { name: "Sign in as this user" }).click();
    const alert = page.getByRole("alert");
    await alert.waitFor({ timeout: 30_000 });
    assert.match(await alert.textContent() ?? "", /tenant/i);
    assert.equal(await page.evaluate(() => sessionStorage.getItem("memsvc.console.token")), null);
    await world.screenshot(page, "signin-refused");
  });

  it("signs in with a pasted token, and refuses text that is not a token", async () => {
    const page = await world.page();
    await page.goto(`${world.url}/console/`);
    await page.getByLabel("Bearer token").fill("not a token");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await seeText(page, "That is not a JWT");
    assert.equal(await page.getByRole("alert").count(), 1);

    await page.getByLabel("Bearer token").fill(await world.token({ sub: "dave", roles: ["reader"] }));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByTestId("who").waitFor({ timeout: 30_000 });
    assert.equal(await page.getByTestId("who").textContent(), "dave @ default (reader)");
    assert.deepEqual(await world.problems(page), []);
  });

  it("shows the service's refusal of a bad token on the sign-in page", async () => {
    const page = await world.page("e30.e30.c2ln");
    await page.goto(`${world.url}/console/`);
    const alert = page.getByRole("alert");
    await alert.waitFor({ timeout: 30_000 });
    assert.match(await alert.textContent() ?? "", /token|auth/i);
    assert.equal(await page.getByRole("heading", { name: "Sign in to memsvc" }).count(), 1);
  });

  it("keeps the token when the service does not answer who it is, and tries again on request", async () => {
    const page = await world.page();
    await signInAs(page, world.url, { sub: "tess" });
    let refused = false;
    await page.route((url) => url.pathname === "/v1/identity", (route) => {
      if (refused) return route.fallback();
      refused = true;
      return route.abort("connectionrefused");
    });
    await page.reload();
    const alert = page.getByRole("alert");
    await alert.waitFor({ timeout: 30_000 });
    assert.equal(await alert.textContent(), "The service did not answer.");
    assert.ok(await page.evaluate(() => sessionStorage.getItem("memsvc.console.token")), "the token is kept");
    await page.getByRole("button", { name: "Try again" }).click();
    await page.getByTestId("who").waitFor({ timeout: 30_000 });
    assert.equal(await page.getByTestId("who").textContent(), "tess @ default");
  });

  it("signs in through Cognito's hosted UI (played by the test): a S256 challenge, the code exchanged with its verifier", async () => {
    const DOMAIN = "auth.example.test";
    const idToken = await world.token({ sub: "erin", roles: ["admin"] });
    const page = await world.page();
    const context = page.context();
    const seen: { challenge?: string; state?: string; exchange?: URLSearchParams; logout?: URLSearchParams } = {};
    await context.route(`${world.url}/console/config.json`, (route) => route.fulfill({ json: {
      api_base: "", auth: { mode: "cognito", domain: DOMAIN, client_id: "console-client", redirect_uri: `${world.url}/console/`,
        scopes: ["openid", "email"] } } }));
    // The deployed CSP lets the page reach the Cognito domain; memsvc serve's does not, so the test adds it.
    await context.route((url) => url.origin === world.url && url.pathname === "/console/", async (route) => {
      const response = await route.fetch();
      const headers = response.headers();
      headers["content-security-policy"] = headers["content-security-policy"].replace("connect-src 'self'", `connect-src 'self' https://${DOMAIN}`);
      await route.fulfill({ response, headers });
    });
    await context.route(`https://${DOMAIN}/**`, async (route) => {
      const url = new URL(route.request().url());
      if (url.pathname === "/oauth2/authorize") {
        assert.equal(url.searchParams.get("response_type"), "code");
        assert.equal(url.searchParams.get("client_id"), "console-client");
        assert.equal(url.searchParams.get("code_challenge_method"), "S256");
        assert.equal(url.searchParams.get("scope"), "openid email");
        seen.challenge = url.searchParams.get("code_challenge") ?? undefined;
        seen.state = url.searchParams.get("state") ?? undefined;
        // The hosted UI sends the browser back with the code. Not as a 302: Playwright does not route a redirect's target.
        const back = `${world.url}/console/?code=the-code&state=${seen.state}`;
        await route.fulfill({ contentType: "text/html", body: `<meta http-equiv="refresh" content="0;url=${back}">` });
        return;
      }
      if (url.pathname === "/logout") {
        seen.logout = url.searchParams;
        await route.fulfill({ contentType: "text/html", body: `<meta http-equiv="refresh" content="0;url=${world.url}/console/">` });
        return;
      }
      seen.exchange = new URLSearchParams(route.request().postData() ?? "");
      await route.fulfill({ json: { id_token: idToken, access_token: "not-for-the-api" },
        headers: { "access-control-allow-origin": world.url } });
    });

    await page.goto(`${world.url}/console/`);
    await page.getByRole("button", { name: "Sign in with your organisation" }).click();
    await page.getByTestId("who").waitFor({ timeout: 30_000 });
    assert.equal(await page.getByTestId("who").textContent(), "erin @ default (admin)");
    assert.equal(seen.exchange?.get("grant_type"), "authorization_code");
    assert.equal(seen.exchange?.get("code"), "the-code");
    const verifier = seen.exchange?.get("code_verifier") ?? "";
    assert.equal(createHash("sha256").update(verifier).digest("base64url"), seen.challenge, "the verifier answers the challenge");
    assert.ok(!page.url().includes("code="), `the code is dropped from the address: ${page.url()}`);
    assert.deepEqual(await world.problems(page), []);

    // Signing out ends the hosted UI's session too, and comes back to a signed-out console.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Sign in with your organisation" }).waitFor({ timeout: 30_000 });
    assert.equal(seen.logout?.get("client_id"), "console-client");
    assert.equal(seen.logout?.get("logout_uri"), `${world.url}/console/`);
    assert.equal(await page.evaluate(() => sessionStorage.getItem("memsvc.console.token")), null);
  });

  it("shows Cognito's refusal on the sign-in page", async () => {
    const page = await world.page();
    await page.context().route(`${world.url}/console/config.json`, (route) => route.fulfill({ json: {
      api_base: "", auth: { mode: "cognito", domain: "auth.example.test", client_id: "c", redirect_uri: `${world.url}/console/`,
        scopes: ["openid"] } } }));
    await page.goto(`${world.url}/console/?error=access_denied`);
    const alert = page.getByRole("alert");
    await alert.waitFor({ timeout: 30_000 });
    assert.equal(await alert.textContent(), "The identity provider refused the sign-in (access_denied).");
    assert.ok(!page.url().includes("error="), "the answer is dropped from the address");
    assert.equal(await page.getByRole("button", { name: "Sign in as this user" }).count(), 0, "no loopback helper on Cognito");
    await world.screenshot(page, "signin-cognito-refused");
  });

  it("drops a callback this tab did not ask for from the address, spends a saved verifier once, and repeats no free text", async () => {
    const page = await world.page();
    const exchanges: string[] = [];
    await page.context().route(`${world.url}/console/config.json`, (route) => route.fulfill({ json: {
      api_base: "", auth: { mode: "cognito", domain: "auth.example.test", client_id: "c", redirect_uri: `${world.url}/console/`,
        scopes: ["openid"] } } }));
    await page.context().route("https://auth.example.test/**", (route) => { exchanges.push(route.request().url()); return route.abort(); });
    const alert = page.getByRole("alert");

    // A link carrying someone else's code: never exchanged, and gone from the address bar.
    await page.goto(`${world.url}/console/?code=someone-elses-code&state=guessed`);
    await alert.waitFor({ timeout: 30_000 });
    assert.equal(await alert.textContent(), "This sign-in answer was not asked for by this tab: sign in again.");
    assert.ok(!page.url().includes("code=") && !page.url().includes("state="), page.url());
    assert.deepEqual(exchanges, []);

    // An error answer spends the verifier this tab saved, and text that is no OAuth error code is not shown.
    await page.evaluate(() => sessionStorage.setItem("memsvc.console.pkce", JSON.stringify({ verifier: "v", state: "s" })));
    await page.goto(`${world.url}/console/?error=${encodeURIComponent("Your account is locked: call +1 555 0100")}&state=s`);
    await alert.waitFor({ timeout: 30_000 });
    assert.equal(await alert.textContent(), "The identity provider refused the sign-in.");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("memsvc.console.pkce")), null, "the verifier is removed");
    assert.ok(!page.url().includes("error="), page.url());

    // A saved verifier that is not ours to read (a corrupt value) is refused in words, not by a stuck page.
    await page.evaluate(() => sessionStorage.setItem("memsvc.console.pkce", "{not json"));
    await page.goto(`${world.url}/console/?code=c&state=s`);
    await alert.waitFor({ timeout: 30_000 });
    assert.equal(await alert.textContent(), "This sign-in answer was not asked for by this tab: sign in again.");
    assert.deepEqual(exchanges, []);
    assert.deepEqual(await world.problems(page), []);
  });
});
