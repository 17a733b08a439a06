"""House rule 1, checked."""

from __future__ import annotations


def test_imports_point_inward():
    """core <- service <- adapters/api; boto3 only in adapters/aws; the environment only in settings;
    nothing from tests/."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "memsvc"
    forbidden = {
        "core": ("memsvc.service", "memsvc.adapters", "memsvc.api", "memsvc.bootstrap", "boto3", "numpy"),
        "service": ("memsvc.adapters", "memsvc.api", "memsvc.bootstrap", "boto3"),
        "api": ("memsvc.adapters", "boto3"),
    }
    problems = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        source = path.read_text()
        tree = ast.parse(source)
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        layer = rel.parts[0] if len(rel.parts) > 1 else ""
        for name in names:
            if any(name == f or name.startswith(f + ".") for f in forbidden.get(layer, ())):
                problems.append(f"{rel} imports {name}")
            if name.startswith("boto3") and not str(rel).startswith("adapters/aws"):
                problems.append(f"{rel} imports boto3")
            if name == "tests" or name.startswith("tests."):
                problems.append(f"{rel} imports the tests")
        if ("os.environ" in source or "getenv" in source) and str(rel) != "settings.py":
            problems.append(f"{rel} reads the environment")
    assert problems == []


def test_the_client_package_stands_alone():
    """memsvc-client imports nothing from the server, and the server nothing from the client;
    the client needs only httpx, botocore and langgraph-checkpoint."""
    import ast
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    client = root / "clients" / "python"

    def imports(package: Path) -> set[str]:
        names = set()
        for path in package.rglob("*.py"):
            tree = ast.parse(path.read_text())
            names |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
        return names

    assert "memsvc" not in imports(client / "memsvc_client")
    assert "memsvc_client" not in imports(root / "memsvc") | imports(root / "functions")
    deps = tomllib.loads((client / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(d.split(">")[0] for d in deps) == ["botocore", "httpx", "langgraph-checkpoint"]
    assert not (root / "memsvc" / "langgraph.py").exists()
