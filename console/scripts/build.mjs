// Builds the console into memsvc/console/static/ (what the Python package ships): tsc's ES modules
// under js/, then public/ as it is. `--check` compares that build with the committed assets instead,
// and fails if they differ, so the shipped files are always this source's build.
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const shipped = resolve(root, "../memsvc/console/static");
const check = process.argv.includes("--check");
// Built aside, then swapped in: a build that fails leaves the shipped assets as they were.
const out = mkdtempSync(join(tmpdir(), "memsvc-console-"));

try {
  execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.json"),
    "--outDir", join(out, "js")], { stdio: "inherit" });
} catch {
  rmSync(out, { recursive: true, force: true });
  console.error("tsc failed: memsvc/console/static/ is unchanged");
  process.exit(1);
}
cpSync(join(root, "public"), out, { recursive: true });

if (check) {
  const differences = compare(out, shipped);
  rmSync(out, { recursive: true, force: true });
  if (differences.length) {
    console.error(`memsvc/console/static/ is not the build of console/ (run \`make console\`):\n  ${differences.join("\n  ")}`);
    process.exit(1);
  }
  console.log("memsvc/console/static/ is the build of console/");
} else {
  rmSync(shipped, { recursive: true, force: true });
  cpSync(out, shipped, { recursive: true });
  rmSync(out, { recursive: true, force: true });
}

function files(dir) {
  const found = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...files(path));
    else found.push(path);
  }
  return found;
}

function compare(built, committed) {
  const a = new Map(files(built).map((p) => [relative(built, p), p]));
  const b = new Map(files(committed).map((p) => [relative(committed, p), p]));
  const differences = [];
  for (const [name, path] of a) {
    if (!b.has(name)) differences.push(`missing: ${name}`);
    else if (!readFileSync(path).equals(readFileSync(b.get(name)))) differences.push(`differs: ${name}`);
  }
  for (const name of b.keys()) if (!a.has(name)) differences.push(`not built from source: ${name}`);
  return differences;
}
