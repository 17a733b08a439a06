"""The documentation's links and commands exist (issue 28, "Docs").

For README.md, docs/**/*.md, clients/*/README.md and benchmarks/README.md:
- every relative link resolves to a file or directory of the repository, and every `#anchor` (on
  the same page or another) is a heading of its target, slugged as GitHub does;
- every `make <target>` named in code (a fenced block or inline code) is a Makefile target;
- every `memsvc <command>` named in code is a subcommand of memsvc's CLI.
No network: external links (with a scheme) are not checked.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from memsvc import cli

ROOT = Path(__file__).resolve().parents[2]


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "clients").glob("*/README.md"))
    return [f for f in files if f.is_file()]


_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def split_code(text: str) -> tuple[list[str], list[str]]:
    """The prose lines (inline code replaced by a placeholder) and the code snippets (fenced
    lines, and each inline code span)."""
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            code.append(line)
            continue
        code.extend(m.group(2) for m in _INLINE_CODE.finditer(line))
        prose.append(_INLINE_CODE.sub("code", line))
    return prose, code


def github_slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # punctuation goes, except hyphens (and underscores)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = re.match(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$", line)
        if not m:
            continue
        slug = github_slug(m.group(2))
        n = seen.get(slug, 0)
        found.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    found.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', path.read_text(encoding="utf-8")))
    return found


_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HREF = re.compile(r'href="([^"]+)"')


def links(path: Path) -> Iterator[str]:
    prose, _ = split_code(path.read_text(encoding="utf-8"))
    for line in prose:
        yield from _LINK.findall(line)
        yield from _HREF.findall(line)


def _relative(target: str) -> bool:
    return not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)  # http:, https:, mailto:


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if not _relative(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(dest):
            where = dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest.name
            broken.append(f"{target}: no heading #{anchor} in {where}")
    return broken


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_slugs_follow_github() -> None:
    assert github_slug("Valid time and as_of") == "valid-time-and-as_of"
    assert github_slug("Knowledge graph (issue 15)") == "knowledge-graph-issue-15"
    assert github_slug("Check a deployment: `memsvc smoke`") == "check-a-deployment-memsvc-smoke"
    assert github_slug("Sessions, messages, semantic upsert and promotion") == (
        "sessions-messages-semantic-upsert-and-promotion")


def test_duplicate_headings_get_suffixes(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# A\n## Notes\n```\n# Notes\n```\n## Notes\n### Notes\n")
    assert anchors(page) == {"a", "notes", "notes-1", "notes-2"}


def test_broken_links_are_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Two words\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[ok](#page) [ok](other.md#two-words) [ok](https://example.com/x#y)\n"
                    "[bad](#nowhere) [bad](other.md#three) [bad](missing.md) `[code](missing.md)`\n"
                    "```\n[code](missing.md)\n```\n")
    assert broken_links(page) == ["#nowhere: no heading #nowhere in page.md",
                                  "other.md#three: no heading #three in other.md", "missing.md: no such file"]


def make_targets() -> set[str]:
    targets = set()
    for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.%/$(){}-][^:=\s]*(?:\s+[^:=\s]+)*)\s*::?(?!=)", line)
        if m:
            targets.update(m.group(1).split())
    return targets


def cli_commands() -> set[str]:
    """The subcommands of `memsvc`, read from the parser `cli.main` builds."""
    captured: list[argparse.ArgumentParser] = []
    original = argparse.ArgumentParser.parse_args

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> argparse.Namespace:
        if self.prog == "memsvc":
            captured.append(self)
            raise SystemExit(0)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    with mock.patch.object(argparse.ArgumentParser, "parse_args", capture), pytest.raises(SystemExit):
        cli.main(["serve"])
    (parser,) = captured
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


# `make <target>` and `memsvc <command>` as a shell would read them: at the start of a command
# (a line, or after a pipe, `&&`, `;`, `$(`, a backtick, `sudo`) or as a path ending in /memsvc.
_MAKE = re.compile(r"(?:^|[;&|(`]\s*|\$\(\s*)make\s+(?:-\S+\s+)*([A-Za-z0-9_.-]+)")
_MEMSVC = re.compile(r"(?:^|[;&|(`]\s*|\$\(\s*|\S*/)memsvc[ \t]+([a-z][a-z0-9-]*)")


# Code spans that start with "memsvc " but are not commands: key-derivation labels (the bytes
# memsvc/core/crypto.py derives subkeys with) and benchmarks/README.md's name for the shipped ranking.
NOT_COMMANDS = ("memsvc field tokens v1", "memsvc graph entities v1", "memsvc now")


def commands(path: Path, pattern: re.Pattern[str]) -> set[str]:
    _, code = split_code(path.read_text(encoding="utf-8"))
    found = set()
    for snippet in code:
        if snippet.startswith(NOT_COMMANDS):
            continue
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", snippet.strip().lstrip("$ ")):
            found.update(pattern.findall(part.strip()))
    return found


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_make_targets_exist(path: Path) -> None:
    assert commands(path, _MAKE) - make_targets() == set()


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_memsvc_commands_exist(path: Path) -> None:
    assert commands(path, _MEMSVC) - cli_commands() == set()


def test_the_checks_see_commands() -> None:
    assert {"run", "test"} <= commands(ROOT / "README.md", _MAKE)
    assert {"serve", "token"} <= commands(ROOT / "README.md", _MEMSVC)
    assert {"run", "test", "eval"} <= make_targets()
    assert {"serve", "token", "smoke", "mcp"} <= cli_commands()
