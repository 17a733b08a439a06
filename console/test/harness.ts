/**
 * The browser tests' world: a live `memsvc serve` (free port, temporary data dir, ready when
 * /health answers) and headless Chromium from Debian's package driven by playwright-core (no
 * browser download). Screenshots go under the test run's temporary directory.
 *
 * MEMSVC_BIN overrides the server command (default: the repo's .venv/bin/memsvc); CHROMIUM_PATH
 * the browser (default /usr/bin/chromium). Without the browser the tests are skipped, except in
 * CI (MEMSVC_REQUIRE_BROWSER=1), where that is a failure.
 */

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url)); // console/build-test/test
export const MEMSVC = process.env.MEMSVC_BIN ?? resolve(here, "../../../.venv/bin/memsvc");
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Why the browser tests cannot run here, or null. In CI a missing browser fails instead. */
export function skipReason(): string | null {
  if (existsSync(CHROMIUM)) return null;
  if (process.env.MEMSVC_REQUIRE_BROWSER === "1") throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`);
  return `no browser at ${CHROMIUM} (apt-get install chromium)`;
}

export interface Token { sub?: string; tenant?: string; roles?: string[] }

export interface World {
  url: string;
  dataDir: string;
  /** Where this run's screenshots go. */
  shots: string;
  token(options?: Token): Promise<string>;
  /** A new page in a fresh browser context (its own sessionStorage), signed in with `token` if given. */
  page(token?: string, options?: { viewport?: { width: number; height: number } }): Promise<Page>;
  /**
   * What went wrong in `page` so far: uncaught errors, console errors and CSP violations. A
   * "Failed to load resource" line is left out: the browser logs every 4xx the API answers, and
   * the pages show those on purpose.
   */
  problems(page: Page): Promise<string[]>;
  /** Saves a full-page screenshot as `<shots>/<name>.png`. */
  screenshot(page: Page, name: string): Promise<string>;
  /** Calls the API as `token`: for seeding data. */
  api<T = unknown>(token: string, method: string, path: string, body?: unknown): Promise<T>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

async function startWorld(): Promise<World> {
  const root = mkdtempSync(join(tmpdir(), "memsvc-console-"));
  const dataDir = join(root, "data");
  const shots = join(root, "screenshots");
  mkdirSync(shots);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let log = "";
  const child: ChildProcess = spawn(MEMSVC, ["serve", "--data-dir", dataDir, "--port", String(port)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (d) => (log += d));
  child.stderr?.on("data", (d) => (log += d));
  let exited: number | null = null;
  const gone = new Promise<void>((done) => child.once("exit", (code) => { exited = code ?? -1; done(); }));
  const kill = () => { if (exited === null) child.kill("SIGTERM"); };
  process.once("exit", kill);

  // Ready when /health answers: polled, each attempt waiting on the server, bounded in count.
  for (let attempt = 0; ; attempt += 1) {
    if (exited !== null) throw new Error(`memsvc serve exited with ${exited}:\n${log}`);
    try {
      const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (attempt > 1200) throw new Error(`memsvc serve did not become healthy:\n${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });

  const tokens = new Map<string, Promise<string>>();
  const problemsOf = new WeakMap<Page, string[]>();
  const world: World = {
    url,
    dataDir,
    shots,
    token({ sub = "alice", tenant, roles = [] } = {}) {
      const id = JSON.stringify([sub, tenant, roles]);
      let t = tokens.get(id);
      if (!t) {
        const args = ["token", "--data-dir", dataDir, "--sub", sub];
        if (tenant) args.push("--tenant", tenant);
        if (roles.length) args.push("--roles", roles.join(","));
        t = run(MEMSVC, args).then(({ stdout }) => stdout.trim());
        tokens.set(id, t);
      }
      return t;
    },
    async page(token, options = {}) {
      const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 800 } });
      if (token) {
        await context.addInitScript((value: string) => sessionStorage.setItem("memsvc.console.token", value), token);
      }
      await context.addInitScript(() => {
        const seen: string[] = [];
        Object.defineProperty(window, "__cspViolations", { value: seen });
        document.addEventListener("securitypolicyviolation", (e) =>
          seen.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} in ${e.sourceFile || "the page"}:${e.lineNumber}`));
      });
      const page = await context.newPage();
      const seen: string[] = [];
      problemsOf.set(page, seen);
      page.on("pageerror", (error) => seen.push(`uncaught: ${error.message}`));
      page.on("console", (message) => {
        if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
          seen.push(`console: ${message.text()}`);
        }
      });
      return page;
    },
    async problems(page) {
      const csp = await page.evaluate(() => (window as unknown as { __cspViolations: string[] }).__cspViolations ?? []);
      return [...(problemsOf.get(page) ?? []), ...csp.map((v) => `csp: ${v}`)];
    },
    async screenshot(page, name) {
      const path = join(shots, `${name}.png`);
      await page.screenshot({ path, fullPage: true });
      return path;
    },
    async api<T>(token: string, method: string, path: string, body?: unknown): Promise<T> {
      const response = await fetch(url + path, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
      return (text ? JSON.parse(text) : undefined) as T;
    },
    async stop() {
      await browser.close();
      kill();
      await gone;
      process.removeListener("exit", kill);
      if (process.env.MEMSVC_KEEP_SCREENSHOTS !== "1") rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return world;
}

/**
 * One World for the enclosing describe block: started before its tests (its screenshot folder
 * logged), handed to `setup` (to keep and to seed), stopped after them, even when `setup` failed.
 */
export function withWorld(setup: (world: World) => Promise<void> | void): void {
  let world: World | undefined;
  before(async () => {
    world = await startWorld();
    console.log(`screenshots: ${world.shots}`);
    await setup(world);
  });
  after(async () => { await world?.stop(); });
}

/** Waits (up to `timeout`) until `page` shows `text` somewhere visible, and answers that element's locator. */
export async function seeText(page: Page, text: string, timeout = 30_000) {
  const found = page.getByText(text, { exact: false }).first();
  await found.waitFor({ state: "visible", timeout });
  return found;
}

/** Signs in through the page's "Sign in as" form (the loopback helper of `memsvc serve`). */
export async function signInAs(page: Page, url: string, who: { sub: string; roles?: string[]; tenant?: string }): Promise<void> {
  await page.goto(`${url}/console/`);
  await page.getByLabel("User (sub)").fill(who.sub);
  await page.getByLabel("Tenant").fill(who.tenant ?? "");
  await page.getByLabel("Roles").fill((who.roles ?? []).join(","));
  await page.getByRole("button", { name: "Sign in as this user" }).click();
  await page.getByTestId("who").waitFor({ state: "visible", timeout: 30_000 });
}
