/**
 * A live `memsvc serve` for the tests: a free port, a temporary data dir, ready when /health
 * answers (polled, never a fixed sleep), stopped when the test process ends. Tokens come from
 * `memsvc token`. MEMSVC_BIN overrides the command (default: the repo's .venv/bin/memsvc).
 */

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url)); // build-test/test
export const MEMSVC = process.env.MEMSVC_BIN ?? resolve(here, "../../../../.venv/bin/memsvc");

export interface LiveServer {
  url: string;
  dataDir: string;
  /** A bearer token this server accepts (cached per sub, tenant and roles). */
  token(options?: { sub?: string; tenant?: string; roles?: string[] }): Promise<string>;
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

export async function startServer(): Promise<LiveServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "memsvc-ts-"));
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

  // Ready when /health answers: poll (each attempt waits on the server, not on a clock), bounded.
  for (let attempt = 0; ; attempt += 1) {
    if (exited !== null) throw new Error(`memsvc serve exited with ${exited}:\n${log}`);
    try {
      const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (attempt > 600) throw new Error(`memsvc serve did not become healthy:\n${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  const tokens = new Map<string, Promise<string>>();
  return {
    url,
    dataDir,
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
    async stop() {
      kill();
      await gone;
      process.removeListener("exit", kill);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
