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

With `api` measured, each run then answers a first request through `functions.api.handler`: a GET
of one memory (`events/api_jwt_get.json`), so that the savings of a lazy cold start show whether
the first request pays them back. The AWS answers come from a local replay server: what
DynamoDB and KMS answered (on moto, `tests.fakes.aws_stack`) to the same GET by a freshly
started API function, recorded here beforehand, served again for each run in the order they
were asked for (`AWS_ENDPOINT_URL`); an unrecorded call fails the run. The wall time of the
request includes the replay server's; the CPU time is the function's alone.

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
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from collections import defaultdict
from contextlib import contextmanager, redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

from infra.config import LAMBDA_PYTHON
from layers.build import build, lambda_python, package_code

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("api", "indexer", "remember", "timeline", "session_retention")
API_BUDGET_MS = 500.0
# What the functions read at bootstrap (docs/aws-deployment.md, "Lambda environment"); nothing here is contacted.
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
out = {{"import_ms": (t1 - t0) * 1000, "bootstrap_ms": (t2 - t1) * 1000, "cpu_ms": (c2 - c0) * 1000}}
event = {event!r}
if event is not None:
    class Context:
        function_name, memory_limit_in_mb, aws_request_id = "memsvc-api", 1024, "cold-start-bench"
        invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:memsvc-api"
    response = functions.api.handler(json.loads(event), Context())
    t3, c3 = time.perf_counter(), time.process_time()
    out.update(request_ms=(t3 - t2) * 1000, request_cpu_ms=(c3 - c2) * 1000, status=response["statusCode"])
print(json.dumps(out))
"""
_IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+\d+ \| *(\S+)")


_GET_EVENT = ROOT / "events" / "api_jwt_get.json"
_PUT_EVENT = ROOT / "events" / "api_jwt_put.json"


def record_first_get() -> tuple[dict[str, str], dict[str, list[dict[str, Any]]]]:
    """The function's environment and, per operation, the AWS answers (status, headers, body) to
    a GET of one memory by a freshly started API function, in the order they were asked for."""
    import botocore.handlers

    from tests.fakes.aws_stack import BUCKET, INDEX, KEYWORD_TABLE, TABLE, aws_stack

    answers: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def record(event_name: str, response_dict: dict[str, Any] | None = None, **_: Any) -> None:
        assert response_dict is not None, event_name
        answers[event_name.rsplit(".", 1)[-1]].append(
            {"status": response_dict["status_code"], "body": response_dict["body"].decode(),
             "headers": {k: v for k, v in response_dict["headers"].items()
                         if k.lower() not in ("content-length", "date", "server", "connection")}})

    # The function's logs and metrics go to stdout: not this benchmark's.
    with redirect_stdout(io.StringIO()), aws_stack(dimension=1024) as stack:  # Titan's, as the settings say
        from functions import api, runtime  # its logger writes to the stdout of its import

        put = stack.app.router.handle(json.loads(_PUT_EVENT.read_text()))
        assert put["statusCode"] == 200, put
        env = {"MEMSVC_TABLE_NAME": TABLE, "MEMSVC_KEYWORD_TABLE_NAME": KEYWORD_TABLE,
               "MEMSVC_VECTOR_BUCKET": BUCKET, "MEMSVC_VECTOR_INDEX": INDEX,
               "MEMSVC_KMS_KEY_ID": stack.clients.kms.list_keys()["Keys"][0]["KeyId"]}
        botocore.handlers.BUILTIN_HANDLERS.append(("response-received", record))
        runtime.set_app(None)  # a cold start: new clients, empty caches
        try:
            with mock.patch.dict(os.environ, env):
                got = api.handler(json.loads(_GET_EVENT.read_text()), _Context())
        finally:
            botocore.handlers.BUILTIN_HANDLERS.remove(("response-received", record))
            runtime.set_app(stack.app)
        assert got["statusCode"] == 200, got
    return env, dict(answers)


class _Context:
    function_name, memory_limit_in_mb, aws_request_id = "memsvc-api", 1024, "cold-start-bench"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:memsvc-api"


@contextmanager
def replaying(answers: dict[str, list[dict[str, Any]]]) -> Iterator[tuple[str, Any]]:
    """A local endpoint answering each JSON-protocol call (`X-Amz-Target`) with the recorded answer
    to the same operation's same call of the run; yields its URL and a `reset()` for a new run."""
    asked: dict[str, int] = defaultdict(int)

    class Replay(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            operation = (self.headers.get("x-amz-target") or "?").rsplit(".", 1)[-1]
            calls = answers.get(operation, [])
            if asked[operation] < len(calls):
                answer = calls[asked[operation]]
            else:
                answer = {"status": 400, "headers": {"content-type": "application/x-amz-json-1.0"},
                          "body": json.dumps({"__type": "ValidationException", "message": f"{operation}: not recorded"})}
            asked[operation] += 1
            body = answer["body"].encode()
            self.send_response(answer["status"])
            for name, value in answer["headers"].items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Replay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked.clear
    finally:
        server.shutdown()
        server.server_close()


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


def run_once(python: str, layer: Path, code: Path, name: str, *, importtime: bool = False,
             request: Request | None = None) -> tuple[dict, dict]:
    """(import, bootstrap and CPU ms, and with `request` the first request's ms, CPU ms and status;
    with `importtime`, ms per top-level package: its modules' own import time, measured in a run
    of its own since `-X importtime` slows the import down)."""
    event = None if request is None else request.event
    probe = _PROBE.format(layer=str(layer), code=str(code), name=name, event=event)
    flags = ["-X", "importtime"] if importtime else []
    env = {**ENV, "PATH": os.environ.get("PATH", "")}
    if request is not None:
        env.update(request.env)
        request.reset()
    done = subprocess.run([python, "-I", "-S", "-B", *flags, "-c", probe], capture_output=True,
                          text=True, env=env, cwd=code)
    if done.returncode != 0:
        raise RuntimeError(f"functions.{name} failed to start:\n{done.stderr[-3000:]}")
    by_package: dict[str, float] = {}
    for m in _IMPORTTIME.finditer(done.stderr):
        package = m.group(2).split(".")[0]
        by_package[package] = by_package.get(package, 0.0) + int(m.group(1)) / 1000
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if request is not None and result["status"] != 200:
        raise RuntimeError(f"the first request answered {result['status']}:\n{done.stdout[-3000:]}")
    return result, by_package


class Request:
    """The first request of each run: the event, the environment naming the recorded table and
    key, and the replay endpoint (`reset` before each run)."""

    def __init__(self, env: dict[str, str], endpoint: str, reset: Any) -> None:
        self.event = _GET_EVENT.read_text()
        self.env = {**env, "AWS_ENDPOINT_URL": endpoint}
        self.reset = reset


def measure(python: str, layer: Path, code: Path, runs: int, label: str, names: list[str],
            request: Request | None = None) -> dict[str, dict]:
    out = {}
    for name in names:
        asked = request if name == "api" else None
        samples = [run_once(python, layer, code, name, request=asked)[0] for _ in range(runs)]
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
        if asked is not None:
            r["first_request_ms"] = round(statistics.median(s["request_ms"] for s in samples), 1)
            r["first_request_cpu_ms"] = round(statistics.median(s["request_cpu_ms"] for s in samples), 1)
            r["with_first_request_ms"] = round(statistics.median(
                s["import_ms"] + s["bootstrap_ms"] + s["request_ms"] for s in samples), 1)
            r["with_first_request_cpu_ms"] = round(statistics.median(
                s["cpu_ms"] + s["request_cpu_ms"] for s in samples), 1)
            print(f"  {label:<12} {name:<18} + first request (GET of a memory) {r['first_request_ms']:>7} ms "
                  f"(CPU {r['first_request_cpu_ms']:>7} ms): cold start + first request "
                  f"{r['with_first_request_ms']:>7} ms (CPU {r['with_first_request_cpu_ms']:>7} ms)", flush=True)
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
    env, answers = record_first_get() if "api" in args.functions else ({}, {})
    with tempfile.TemporaryDirectory(prefix="memsvc-cold-start-") as tmp, replaying(answers) as (endpoint, reset):
        request = Request(env, endpoint, reset) if "api" in args.functions else None
        layer, code = prepare(Path(tmp), args.layer)
        results["as built"] = measure(python, layer, code, args.runs, "as built", args.functions, request)
        strip_bytecode(layer, code)
        results["no bytecode"] = measure(python, layer, code, args.runs, "no bytecode", args.functions, request)
    if "api" not in args.functions:
        return 0
    api = results["as built"]["api"]
    print(f"\nAPI function, as built: {api['total_ms']} ms import + bootstrap, {api['cpu_ms']} ms of CPU (budget "
          f"{API_BUDGET_MS:.0f} ms): {'within' if api['total_ms'] <= API_BUDGET_MS else 'OVER'}; load "
          f"{os.getloadavg()[0]:.2f} (on a busy machine the wall time mostly waits for a CPU; the CPU time much less)")
    print(f"With its first request (a GET of a memory): {api['with_first_request_ms']} ms, "
          f"{api['with_first_request_cpu_ms']} ms of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
