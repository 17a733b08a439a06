"""Build the Lambda dependency layer without Docker.

    python layers/build.py --out build/layer   # build into build/layer/python, print the size
    python layers/build.py --check             # resolve only (pip --dry-run): pins, wheels

What goes in: the project's runtime dependencies plus the `aws` extra (pyproject.toml), each at
the version pinned in constraints.txt, and their dependencies, which must be pinned there too
(the build fails otherwise). pip installs wheels only, for the Lambda runtime's Python and
platform (`infra.config.LAMBDA_PYTHON`, `LAMBDA_PLATFORMS`), so nothing is compiled here and no
container is needed. `cdk synth` runs the same build through CDK's local bundling.

boto3 is shipped although the runtime has one: the functions then run the botocore the tests
ran (S3 Vectors is a young API), not whatever version the runtime carries that week.

The layer carries bytecode compiled by a Python of the Lambda runtime's version when one is on
this machine (`python3.12` on PATH, pyenv's, or `MEMSVC_LAMBDA_PYTHON`): Lambda's `/opt` is
read-only, so without it every cold start compiles every module it imports from source (the API
function's cold start went from seconds to a few hundred ms, `python -m benchmarks.cold_start`).
The `.pyc` files are `unchecked-hash` ones: no timestamps, so the same sources give the same bytes.

botocore's data keeps only the services the functions call (`BOTOCORE_SERVICES`): its first
client lists every service's directory and parses every service's endpoints, ~55 ms of each
cold start with all ~440 services (and 17.8 MiB of the layer: 80.5 -> 62.7 MiB).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `python layers/build.py`
    sys.path.insert(0, str(ROOT))

from infra.config import LAMBDA_PLATFORMS, LAMBDA_PYTHON  # noqa: E402

__all__ = [
    "LayerSpec",
    "layer_spec",
    "pip_command",
    "resolve",
    "build",
    "LAYER_UNZIPPED_BUDGET",
    "LAMBDA_UNZIPPED_LIMIT",
    "lambda_python",
    "compile_bytecode",
    "package_code",
    "CODE_PACKAGES",
    "BOTOCORE_SERVICES",
    "prune_botocore_data",
]

LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024  # function code + all layers, unzipped
# What the layer may take, leaving room for the function code and a future layer.
LAYER_UNZIPPED_BUDGET = 200 * 1024 * 1024
EXTRA = "aws"
LAYER_RUNTIME_DIR = "/opt/python"  # where Lambda mounts a Python layer's python/
CODE_RUNTIME_DIR = "/var/task"  # where Lambda unpacks the function's code
CODE_PACKAGES = ("functions", "memsvc")  # the function code asset: nothing else of the repository

# The AWS services the functions call (`memsvc.adapters.aws.clients`), plus STS, which botocore's
# credential providers may call. botocore's data of every other service is left out of the layer:
# creating the first client lists every service's directory (~440 of them) and parses
# endpoints.json (1.2 MB, every service's endpoints), about 55 ms of each cold start.
BOTOCORE_SERVICES = ("dynamodb", "s3vectors", "kms", "events", "bedrock-runtime", "sqs", "sts")

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class LayerSpec:
    """The top-level requirements, pinned, and the constraints file that pins the rest."""

    requirements: tuple[str, ...]  # "name==version", from constraints.txt
    pins: dict[str, str]  # canonical name -> version, all of constraints.txt
    constraints: Path

    def digest(self) -> str:
        """Changes when anything that decides the layer's content changes (the asset hash)."""
        h = hashlib.sha256()
        h.update(f"{LAMBDA_PYTHON} {' '.join(LAMBDA_PLATFORMS)}\n".encode())
        h.update(b"bytecode\n" if lambda_python() else b"sources only\n")  # see compile_bytecode
        h.update("\n".join(self.requirements).encode())
        h.update(self.constraints.read_bytes())
        h.update(Path(__file__).read_bytes())
        return h.hexdigest()


def layer_spec(root: Path = ROOT) -> LayerSpec:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"][EXTRA]]
    constraints = root / "constraints.txt"
    pins: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_canonical(name)] = version.strip()
    requirements = []
    for spec in wanted:
        name = _canonical(_NAME.match(spec).group(1))  # extras/markers are not used here
        if name not in pins:
            raise SystemExit(f"{name} (pyproject.toml) has no pin in constraints.txt")
        requirements.append(f"{name}=={pins[name]}")
    return LayerSpec(tuple(requirements), pins, constraints)


def pip_command(spec: LayerSpec, target: Path, requirements_file: Path, *, dry_run: bool = False,
                report: Path | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--no-compile", "--only-binary=:all:", "--implementation", "cp",
           "--python-version", LAMBDA_PYTHON]
    for platform in LAMBDA_PLATFORMS:
        cmd += ["--platform", platform]
    cmd += ["--target", str(target), "-r", str(requirements_file), "-c", str(spec.constraints)]
    if dry_run:
        cmd += ["--dry-run", "--ignore-installed"]
    if report is not None:
        cmd += ["--report", str(report)]
    return cmd


def _run_pip(spec: LayerSpec, target: Path, *, dry_run: bool) -> list[dict]:
    """pip install (or resolve) into `target`; returns the report's `install` entries, checked
    against the pins: every distribution in the layer must be pinned in constraints.txt."""
    with tempfile.TemporaryDirectory(prefix="memsvc-layer-") as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text("\n".join(spec.requirements) + "\n")
        report = Path(tmp) / "report.json"
        cmd = pip_command(spec, target, requirements, dry_run=dry_run, report=report)
        env = {**os.environ, "PIP_NO_INPUT": "1"}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pip failed ({done.returncode}):\n{done.stderr[-4000:]}")
        installs = json.loads(report.read_text())["install"]
    unpinned = []
    for item in installs:
        name, version = _canonical(item["metadata"]["name"]), item["metadata"]["version"]
        if spec.pins.get(name) != version:
            unpinned.append(f"{name}=={version} (constraints.txt: {spec.pins.get(name, 'absent')})")
    if unpinned:
        raise SystemExit("layer packages not pinned in constraints.txt: " + ", ".join(unpinned))
    return installs


def resolve(spec: LayerSpec | None = None) -> list[dict]:
    """Resolve the layer for the Lambda platform without installing (PyPI metadata only)."""
    spec = spec or layer_spec()
    with tempfile.TemporaryDirectory(prefix="memsvc-layer-dry-") as target:
        return _run_pip(spec, Path(target), dry_run=True)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def build(out: Path, spec: LayerSpec | None = None) -> int:
    """Install the layer into `out/python` (Lambda's layout for Python); returns its size."""
    spec = spec or layer_spec()
    target = out / "python"
    target.mkdir(parents=True, exist_ok=True)
    installs = _run_pip(spec, target, dry_run=False)
    for cache in list(target.rglob("__pycache__")):
        for f in cache.iterdir():
            f.unlink()
        cache.rmdir()
    prune_botocore_data(target / "botocore" / "data")
    compile_bytecode(target, LAYER_RUNTIME_DIR)
    size = _size(out)
    names = ", ".join(f"{i['metadata']['name']}=={i['metadata']['version']}" for i in installs)
    print(f"layer: {len(installs)} distributions, {size / 2**20:.1f} MiB unzipped "
          f"(budget {LAYER_UNZIPPED_BUDGET / 2**20:.0f} MiB, Lambda limit "
          f"{LAMBDA_UNZIPPED_LIMIT / 2**20:.0f} MiB with the code): {names}", file=sys.stderr)
    if size > LAYER_UNZIPPED_BUDGET:
        raise SystemExit(f"the layer is {size / 2**20:.1f} MiB, over its {LAYER_UNZIPPED_BUDGET / 2**20:.0f} MiB budget")
    return size


def prune_botocore_data(data: Path) -> None:
    """Keep the models of `BOTOCORE_SERVICES` only, and their entries in endpoints.json (the
    partitions' defaults stay: they are what a service without an entry resolves to)."""
    for service in data.iterdir():
        if service.is_dir() and service.name not in BOTOCORE_SERVICES:
            shutil.rmtree(service)
    endpoints = data / "endpoints.json"
    document = json.loads(endpoints.read_text())
    for partition in document["partitions"]:
        partition["services"] = {name: entry for name, entry in partition["services"].items()
                                 if name in BOTOCORE_SERVICES}
    endpoints.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


def package_code(root: Path, out: Path) -> None:
    """The functions' code asset in `out`: `functions/` and `memsvc/` (package data included),
    without this machine's bytecode, then compiled for the Lambda runtime like the layer."""
    for package in CODE_PACKAGES:
        shutil.copytree(root / package, out / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    compile_bytecode(out, CODE_RUNTIME_DIR)


def lambda_python() -> str | None:
    """An interpreter of the Lambda runtime's version (`LAMBDA_PYTHON`): `MEMSVC_LAMBDA_PYTHON`,
    this one, `python3.12` on PATH, or pyenv's; None if this machine has none."""
    explicit = os.environ.get("MEMSVC_LAMBDA_PYTHON")
    candidates = [explicit] if explicit else [sys.executable, shutil.which(f"python{LAMBDA_PYTHON}")]
    if not explicit:
        pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
        candidates += sorted(str(p) for p in pyenv.glob(f"{LAMBDA_PYTHON}.*/bin/python{LAMBDA_PYTHON}"))
    for python in filter(None, candidates):
        try:
            done = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.strip() == LAMBDA_PYTHON:
            return python
    return None


def compile_bytecode(root: Path, runtime_dir: str) -> bool:
    """Compile every module under `root` for the Lambda runtime's Python, if this machine has one
    (see the module's doc); otherwise say so on stderr and leave the sources alone. The code
    objects name their files as Lambda sees them, under `runtime_dir` (`/opt/python` for the
    layer), never the build directory: tracebacks point at real paths, and builds are byte-identical."""
    python = lambda_python()
    if python is None:
        print(f"warning: no Python {LAMBDA_PYTHON} here (set MEMSVC_LAMBDA_PYTHON): {root} ships without "
              "bytecode, and every cold start will compile its modules from source", file=sys.stderr)
        return False
    done = subprocess.run([python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                           "-s", str(root), "-p", runtime_dir, str(root)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"compiling {root} for Python {LAMBDA_PYTHON} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "layer")
    parser.add_argument("--check", action="store_true", help="resolve only, install nothing")
    args = parser.parse_args(argv)
    spec = layer_spec()
    if args.check:
        for item in resolve(spec):
            url = item["download_info"]["url"].rsplit("/", 1)[-1]
            print(f"{item['metadata']['name']}=={item['metadata']['version']}  {url}")
        return 0
    build(args.out, spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
