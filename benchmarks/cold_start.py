"""`python -m benchmarks.cold_start`: the Lambda functions' cold start, import plus bootstrap, on this machine.

Builds the Lambda layer (`layers/build.py`: pip, so PyPI is needed; or `--layer` names one already
built, which is copied) and the code asset (`layers.build.package_code`: `functions/` and
`memsvc/`, as CDK ships them) into a temp dir. Then runs each function's module in a fresh
interpreter of the Lambda runtime's Python version (`infra.config.LAMBDA_PYTHON`) with only the
layer, the code and the standard library on `sys.path` (`-I -S`: no site-packages, no user site,
no PYTHON* variables). It times `import functions.<name>` and then the bootstrap the first
invocation runs (`functions.runtime.aws_app()`: settings, boto3 clients, adapters), and,
in one more run with `-X importtime`, what is slow (each top-level package's modules' own import
time); and the CPU time of both (on a busy machine the wall time includes waiting for a CPU; the CPU time
much less so). Nothing goes to the network: clients are built, not called. Each
configuration runs `--runs` times; the report is the median.

Two configurations:
- `as built`: the layer and the code asset as `layers/build.py` and CDK's bundling produce them
  (`build`, `package_code`: with bytecode for the runtime's Python). Lambda's `/opt` and
  `/var/task` are read-only, so whatever bytecode they lack is compiled from source on every
  cold start (`-B` reproduces that here: nothing is written between runs).
- `no bytecode`: every `.pyc` removed: what Lambda ran before the build compiled them, and what
  it runs when the build finds no Python of the runtime's version.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from infra.config import LAMBDA_PYTHON
from layers.build import build, lambda_python, package_code

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("api", "indexer", "remember", "timeline", "session_retention")
API_BUDGET_MS = 500.0
# What the functions read at bootstrap (README, "Lambda environment"); nothing here is contacted.
ENV = {
    "MEMSVC_TABLE_NAME": "memsvc-items",
    "MEMSVC_KEYWORD_TABLE_NAME": "memsvc-keywords",
    "MEMSVC_VECTOR_BUCKET": "memsvc-vectors",
    "MEMSVC_VECTOR_INDEX": "memories",
    "MEMSVC_KMS_KEY_ID": "alias/memsvc",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "AWS_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "cold-start-bench",
    "AWS_SECRET_ACCESS_KEY": "cold-start-bench",
    "AWS_LAMBDA_FUNCTION_NAME": "memsvc-cold-start-bench",
    "LANG": "C.UTF-8",
}
_PROBE = """
import json, sys, time
sys.path[:0] = [{layer!r}, {code!r}]
t0, c0 = time.perf_counter(), time.process_time()
import functions.{name}
t1, c1 = time.perf_counter(), time.process_time()
from functions.runtime import aws_app
aws_app()
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({{"import_ms": (t1 - t0) * 1000, "bootstrap_ms": (t2 - t1) * 1000, "cpu_ms": (c2 - c0) * 1000}}))
"""
_IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+\d+ \| *(\S+)")


def prepare(workdir: Path, layer: Path | None) -> tuple[Path, Path]:
    """The layer's `python/` dir and the code asset, both built as CDK builds them."""
    if layer is None:
        build(workdir / "layer")
    else:  # a copy: the second configuration strips its bytecode
        shutil.copytree(layer, workdir / "layer")
    package_code(ROOT, workdir / "code")
    return workdir / "layer" / "python", workdir / "code"


def strip_bytecode(*roots: Path) -> None:
    for root in roots:
        for cache in list(root.rglob("__pycache__")):
            shutil.rmtree(cache)


def run_once(python: str, layer: Path, code: Path, name: str, *, importtime: bool = False) -> tuple[dict, dict]:
    """(import, bootstrap and CPU ms; with `importtime`, ms per top-level package: its modules' own
    import time, measured in a run of its own since `-X importtime` slows the import down)."""
    probe = _PROBE.format(layer=str(layer), code=str(code), name=name)
    flags = ["-X", "importtime"] if importtime else []
    done = subprocess.run([python, "-I", "-S", "-B", *flags, "-c", probe], capture_output=True,
                          text=True, env={**ENV, "PATH": os.environ.get("PATH", "")}, cwd=code)
    if done.returncode != 0:
        raise RuntimeError(f"functions.{name} failed to start:\n{done.stderr[-3000:]}")
    by_package: dict[str, float] = {}
    for m in _IMPORTTIME.finditer(done.stderr):
        package = m.group(2).split(".")[0]
        by_package[package] = by_package.get(package, 0.0) + int(m.group(1)) / 1000
    return json.loads(done.stdout.strip().splitlines()[-1]), by_package


def measure(python: str, layer: Path, code: Path, runs: int, label: str, names: list[str]) -> dict[str, dict]:
    out = {}
    for name in names:
        samples = [run_once(python, layer, code, name)[0] for _ in range(runs)]
        packages = run_once(python, layer, code, name, importtime=True)[1]
        out[name] = {"import_ms": round(statistics.median(s["import_ms"] for s in samples), 1),
                     "bootstrap_ms": round(statistics.median(s["bootstrap_ms"] for s in samples), 1),
                     "total_ms": round(statistics.median(s["import_ms"] + s["bootstrap_ms"] for s in samples), 1),
                     "cpu_ms": round(statistics.median(s["cpu_ms"] for s in samples), 1),
                     "slowest_packages": sorted(((round(ms, 1), p) for p, ms in packages.items()), reverse=True)[:6]}
        r = out[name]
        print(f"  {label:<12} {name:<18} import {r['import_ms']:>7} ms  bootstrap {r['bootstrap_ms']:>7} ms  "
              f"total {r['total_ms']:>7} ms (CPU {r['cpu_ms']:>7} ms)   slowest packages (ms, -X importtime): "
              + ", ".join(f"{p} {ms}" for ms, p in r["slowest_packages"][:5]), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cold_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--functions", nargs="+", choices=FUNCTIONS, default=list(FUNCTIONS))
    parser.add_argument("--layer", type=Path, help="an already built layer dir (holding python/)")
    args = parser.parse_args(argv)
    python = lambda_python()
    if python is None:
        print(f"cold_start: no Python {LAMBDA_PYTHON} here (the layer's compiled wheels are for the Lambda "
              f"runtime's version): set MEMSVC_LAMBDA_PYTHON", file=sys.stderr)
        return 2
    print(f"cold start: {python}, {args.runs} runs each, median; load {os.getloadavg()[0]:.2f}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="memsvc-cold-start-") as tmp:
        layer, code = prepare(Path(tmp), args.layer)
        results["as built"] = measure(python, layer, code, args.runs, "as built", args.functions)
        strip_bytecode(layer, code)
        results["no bytecode"] = measure(python, layer, code, args.runs, "no bytecode", args.functions)
    if "api" not in args.functions:
        return 0
    api = results["as built"]["api"]
    print(f"\nAPI function, as built: {api['total_ms']} ms import + bootstrap, {api['cpu_ms']} ms of CPU (budget "
          f"{API_BUDGET_MS:.0f} ms): {'within' if api['total_ms'] <= API_BUDGET_MS else 'OVER'}; load "
          f"{os.getloadavg()[0]:.2f} (on a busy machine the wall time mostly waits for a CPU; the CPU time much less)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
