"""cfn-lint over the synthesized templates (what `make synth` and tests/infra run).

    python -m infra.lint cdk.out/*.template.json
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from cfnlint.api import ManualArgs, lint_file

from infra.config import ENVIRONMENTS

__all__ = ["IGNORED_CHECKS", "lint_templates", "main"]

# Each ignored check, and why it is noise for these templates.
IGNORED_CHECKS = {
    "W3005": "CDK's lambda.Function adds DependsOn on its role, which `Role: GetAtt` already implies; "
             "redundant ordering, not a defect.",
}


def lint_templates(paths: Iterable[Path]) -> list[str]:
    """Every cfn-lint finding (errors, warnings, informational) as `file:line: rule message`."""
    config = ManualArgs(regions=sorted({c.region for c in ENVIRONMENTS.values()}),
                        ignore_checks=list(IGNORED_CHECKS))
    findings = []
    for path in paths:
        for match in lint_file(Path(path), config):
            findings.append(f"{Path(path).name}:{match.linenumber}: {match.rule.id} {match.message}")
    return findings


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    if not paths:
        print("usage: python -m infra.lint TEMPLATE...", file=sys.stderr)
        return 2
    findings = lint_templates(paths)
    for finding in findings:
        print(finding)
    print(f"cfn-lint: {len(paths)} templates, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
