"""The export file (issue 26, docs/export-format.md): JSON Lines, a header first, one record per
line, a trailer last. Pure: writing and reading lines, and the checksum that detects truncation
and tampering of a file that is not encrypted (an encrypted one is also sealed frame by frame,
`core.export_crypto`).

The checksum chains every line before the trailer: h0 = 32 zero bytes, h(i) = SHA-256(h(i-1) ||
line i without its newline); the trailer names the last one in hex. It is carried from one
batch of lines to the next as 32 bytes, so a job writing the file in pages needs no other state.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memsvc.core import strict_json
from memsvc.core.errors import InvalidArgument

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "READ_VERSIONS", "RECORD_KINDS",
           "ExportHeader", "LineWriter", "LineChecker",
           "BadExportFile", "ZERO_CHAIN", "encode_line"]

FORMAT_NAME = "memsvc-export"
# 2 added the `task` record, 3 the `memory_version` record: an older file is a newer one without them
FORMAT_VERSION = 3
READ_VERSIONS = (1, 2, 3)
# In the order an export writes them: what a later kind refers to comes first (a policy bundle
# before the memories it governs, a plan before its working memory, entities before relations).
RECORD_KINDS = ("settings", "policies", "entity", "relation", "session", "message", "memory_version", "memory", "plan",
                "working", "task")
ZERO_CHAIN = bytes(32)
MAX_LINE_BYTES = 1024 * 1024  # a memory is at most 256 KiB of JSON; nothing else comes near


class BadExportFile(InvalidArgument):
    """The file is not a memsvc export this version reads, or it was cut short or changed."""


@dataclass(frozen=True)
class ExportHeader:
    memsvc_version: str
    tenant: str
    scope: dict[str, Any]  # {"tenant": true} | {"prefix": [...]} | {"user_id": "..."}
    created_at: str  # RFC 3339

    def to_json(self) -> dict[str, Any]:
        return {"kind": "header", "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
                "memsvc_version": self.memsvc_version, "tenant": self.tenant, "scope": self.scope,
                "created_at": self.created_at}

    @classmethod
    def of(cls, doc: Any) -> "ExportHeader":
        if not isinstance(doc, dict) or doc.get("kind") != "header" or doc.get("format") != FORMAT_NAME:
            raise BadExportFile("the file does not start with a memsvc export header")
        if doc.get("format_version") not in READ_VERSIONS or isinstance(doc.get("format_version"), bool):
            raise BadExportFile(f"export format version {doc.get('format_version')!r} is not one this server "
                                f"reads (it reads {', '.join(map(str, READ_VERSIONS))})",
                                details={"format_version": doc.get("format_version"),
                                         "supported": list(READ_VERSIONS)})
        tenant, scope = doc.get("tenant"), doc.get("scope")
        if not isinstance(tenant, str) or not tenant or not isinstance(scope, dict):
            raise BadExportFile("the export header has no tenant or scope")
        return cls(str(doc.get("memsvc_version", "")), tenant, scope, str(doc.get("created_at", "")))


def encode_line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass
class LineWriter:
    """Lines of an export, chained into the checksum as they are written. `chain` and `counts`
    are what a paged writer keeps between pages."""

    chain: bytes = ZERO_CHAIN
    counts: Counter[str] = field(default_factory=Counter)

    def lines(self, docs: Iterable[dict[str, Any]]) -> bytes:
        out = bytearray()
        for doc in docs:
            line = encode_line(doc)
            self.chain = hashlib.sha256(self.chain + line).digest()
            if doc["kind"] != "header":
                self.counts[doc["kind"]] += 1
            out += line + b"\n"
        return bytes(out)

    def trailer(self) -> bytes:
        return encode_line({"kind": "trailer", "records": sum(self.counts.values()),
                            "counts": dict(sorted(self.counts.items())), "sha256": self.chain.hex()}) + b"\n"


@dataclass
class LineChecker:
    """Reads an export's lines in order, checking the chain; `feed` takes bytes as they come (a
    line may span two pieces) and yields the records; `finish` says whether the trailer was met
    and agreed. Linear in the input; a line is at most `MAX_LINE_BYTES`."""

    chain: bytes = ZERO_CHAIN
    counts: Counter[str] = field(default_factory=Counter)
    header: ExportHeader | None = None
    ended: bool = False
    line_number: int = 0
    pending: bytes = b""

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        buffer = self.pending + data
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            self._check_length(end - start)
            yield from self._line(buffer[start:end])
            start = end + 1
        self.pending = buffer[start:]
        self._check_length(len(self.pending))

    def _check_length(self, length: int) -> None:
        """The next line's length (or of what of it has come yet), at most `MAX_LINE_BYTES`."""
        if length > MAX_LINE_BYTES:
            raise BadExportFile(f"line {self.line_number + 1} is longer than {MAX_LINE_BYTES} bytes",
                                details={"line": self.line_number + 1})

    def finish(self) -> None:
        if self.pending.strip():
            raise BadExportFile("the file ends in the middle of a line: it was cut short",
                                details={"line": self.line_number + 1})
        if not self.ended:
            raise BadExportFile("the file has no trailer: it was cut short", details={"line": self.line_number})

    def _line(self, line: bytes) -> Iterator[dict[str, Any]]:
        self.line_number += 1
        if not line.strip():
            return
        if self.ended:
            raise BadExportFile("the file goes on after its trailer", details={"line": self.line_number})
        try:
            doc = strict_json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise BadExportFile(f"line {self.line_number} is not JSON", details={"line": self.line_number}) from None
        except strict_json.Refused as exc:  # what the API refuses in a request body, never imported
            raise BadExportFile(f"line {self.line_number}: {exc}", details={"line": self.line_number}) from None
        if not isinstance(doc, dict):
            raise BadExportFile(f"line {self.line_number} is not a JSON object", details={"line": self.line_number})
        if self.header is None:
            self.header = ExportHeader.of(doc)
        elif doc.get("kind") == "trailer":
            self._check_trailer(doc)
            return
        elif doc.get("kind") not in RECORD_KINDS:
            raise BadExportFile(f"line {self.line_number} has an unknown kind", details={
                "line": self.line_number, "allowed": list(RECORD_KINDS)})
        else:
            self.counts[doc["kind"]] += 1
        self.chain = hashlib.sha256(self.chain + line).digest()
        if doc["kind"] != "header":
            yield doc

    def _check_trailer(self, doc: dict[str, Any]) -> None:
        self.ended = True
        if doc.get("sha256") != self.chain.hex() or doc.get("records") != sum(self.counts.values()):
            raise BadExportFile("the file's checksum does not match its records: it was changed or cut short",
                                details={"line": self.line_number})
