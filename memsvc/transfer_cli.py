"""`memsvc export`, `memsvc import` and `memsvc convert`. Export and import drive a running
deployment's jobs through the admin API (`/admin/v1/exports`, `/admin/v1/imports`), so the same
commands work against `memsvc serve` (the server keeps running) and an AWS stack; the token must
carry role admin. Convert works on files alone (`memsvc.foreign_import`).

The passphrase is read from a file (`--passphrase-file`, `-` for stdin) or asked for on the
terminal, never taken from the command line, where other users of the machine could read it."""

from __future__ import annotations

import argparse
import base64
import getpass
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from memsvc.foreign_import import SOURCES, ConversionError, convert

__all__ = ["add_commands", "run"]

PART_BYTES = 256 * 1024  # the server's largest uploaded part
_POLL_SECONDS = 0.5


def add_commands(sub: Any) -> None:
    export = sub.add_parser("export", help="export the tenant, a namespace prefix or a user into a file, "
                                           "sealed under a passphrase or a KMS key (docs/export-format.md)")
    _connection(export)
    export.add_argument("--out", type=Path, required=True, help="the file to write")
    scope = export.add_mutually_exclusive_group()
    scope.add_argument("--prefix", nargs="+", metavar="SEGMENT", help="a namespace prefix, segment by segment")
    scope.add_argument("--user-id", help="one user's layers, sessions and plans")
    key = export.add_mutually_exclusive_group()
    key.add_argument("--kms-key-id", help="seal under this KMS key (AWS) instead of a passphrase")
    key.add_argument("--no-encrypt", action="store_true",
                     help="write a plaintext file: every memory in the clear (only when you mean it)")
    export.add_argument("--passphrase-file", type=Path, help="read the passphrase from this file ('-': stdin)")

    load = sub.add_parser("import", help="import an export file into the token's tenant (idempotent)")
    _connection(load)
    load.add_argument("file", type=Path, help="the export file")
    load.add_argument("--passphrase-file", type=Path, help="of a file sealed under a passphrase ('-': stdin)")
    load.add_argument("--dry-run", action="store_true", help="report what would change, write nothing")
    load.add_argument("--allow-other-tenant", action="store_true",
                      help="import a file exported from another tenant (into the token's tenant)")

    convert = sub.add_parser("convert", help="turn a LangGraph store or a mem0 export into a file `memsvc import` "
                                             "takes (docs/export-format.md, 'Converting from other stores')")
    convert.add_argument("source_kind", choices=SOURCES, help="what the source is")
    convert.add_argument("source", type=Path, help="the SQLite file, CSV or JSON (Lines) file")
    convert.add_argument("--out", type=Path, required=True, help="the export file to write (plaintext)")
    convert.add_argument("--tenant", default="default", help="the tenant you will import it into")
    convert.add_argument("--user-id", default=None, help="mem0: the user of memories that name none")


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="the API's base URL (memsvc serve: http://127.0.0.1:8000)")
    parser.add_argument("--token", required=True, help="a bearer token with role admin")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the job")


def run(args: argparse.Namespace) -> int:
    if args.command == "convert":
        try:
            counts = convert(args.source_kind, args.source, args.out, tenant=args.tenant, default_user=args.user_id)
        except ConversionError as exc:
            print(f"memsvc convert: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"memsvc convert: cannot read or write {exc.filename or 'a file'}", file=sys.stderr)
            return 1
        print(json.dumps({"file": str(args.out), "counts": counts}))
        return 0
    with httpx.Client(base_url=args.url, headers={"Authorization": f"Bearer {args.token}"}, timeout=60.0) as http:
        try:
            return _export(http, args) if args.command == "export" else _import(http, args)
        except _Refused as exc:
            print(f"memsvc {args.command}: {exc}", file=sys.stderr)
            return 1


class _Refused(Exception):
    """The server refused, or the job failed: its error's code and message."""


def _call(http: httpx.Client, method: str, path: str, body: Any = None) -> Any:
    try:
        r = http.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise _Refused(f"cannot reach the server: {type(exc).__name__}") from None
    if r.status_code >= 400:
        try:
            error = r.json()["error"]
            raise _Refused(f"{error['code']}: {error['message']}")
        except (ValueError, KeyError, TypeError):
            raise _Refused(f"HTTP {r.status_code}") from None
    return r.json() if r.content else None


def _export(http: httpx.Client, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"scope": {"prefix": args.prefix} if args.prefix else
                            {"user_id": args.user_id} if args.user_id else {}}
    if args.no_encrypt:
        body["encrypt"] = False
    elif args.kms_key_id:
        body["kms_key_id"] = args.kms_key_id
    else:
        body["passphrase"] = _passphrase(args.passphrase_file, confirm=True)
    job = _wait(http, "exports", _call(http, "POST", "/admin/v1/exports", body)["id"], args.timeout)
    partial = args.out.with_name(args.out.name + ".partial")
    with open(partial, "wb") as out:
        for index in range(job["parts"]):
            part = _call(http, "GET", f"/admin/v1/exports/{job['id']}/parts?index={index}")
            out.write(base64.b64decode(part["data"]))
    partial.replace(args.out)
    print(json.dumps({"file": str(args.out), "bytes": job["bytes"], "records": job["total"],
                      "counts": {kind: c["exported"] for kind, c in job["counts"].items()},
                      "encryption": job["encryption"], "job": job["id"]}))
    return 0


def _import(http: httpx.Client, args: argparse.Namespace) -> int:
    with open(args.file, "rb") as source:
        first_line = source.readline(64 * 1024)
    sealed_by_passphrase = (first_line.startswith(b'{"format":"memsvc-export-sealed"')
                            and b'"kind":"passphrase"' in first_line)
    passphrase = _passphrase(args.passphrase_file, confirm=False) if sealed_by_passphrase else None
    job_id = _call(http, "POST", "/admin/v1/imports",
                   {"dry_run": args.dry_run, "allow_other_tenant": args.allow_other_tenant})["id"]
    parts = 0
    with open(args.file, "rb") as source:
        while chunk := source.read(PART_BYTES):
            _call(http, "PUT", f"/admin/v1/imports/{job_id}/parts",
                  {"index": parts, "data": base64.b64encode(chunk).decode("ascii")})
            parts += 1
    start: dict[str, Any] = {"parts": parts}
    if passphrase is not None:
        start["passphrase"] = passphrase
    _call(http, "POST", f"/admin/v1/imports/{job_id}/start", start)
    job = _wait(http, "imports", job_id, args.timeout)
    print(json.dumps({"dry_run": args.dry_run, "records": job["total"], "counts": job["counts"],
                      "remapped": job["remapped"], "source": job["source"], "job": job["id"]}))
    return 0


def _wait(http: httpx.Client, kind: str, job_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    # On a terminal the progress line rewrites itself; into a file or a pipe each line stands alone.
    end = "\r" if sys.stderr.isatty() else "\n"
    report: Callable[[str], None] = lambda line: print(line, file=sys.stderr, end=end, flush=True)  # noqa: E731
    while True:
        job = _call(http, "GET", f"/admin/v1/{kind}/{job_id}")
        report(f"{job['kind']} {job['state']}: {job['done']} records" +
               (f" of {job['total']}" if job["total"] is not None else ""))
        if job["state"] in ("done", "failed") and end == "\r":
            print(file=sys.stderr)
        if job["state"] == "done":
            return job
        if job["state"] == "failed":
            raise _Refused(f"{job['error']['code']}: {job['error']['message']}")
        if time.monotonic() > deadline:
            raise _Refused(f"the job is still {job['state']} after {timeout:.0f} s (job {job_id})")
        time.sleep(_POLL_SECONDS)


def _passphrase(path: Path | None, *, confirm: bool) -> str:
    if path is not None:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
        return text.rstrip("\r\n")
    first = getpass.getpass("passphrase: ")
    if confirm and getpass.getpass("passphrase again: ") != first:
        raise _Refused("the passphrases differ")
    return first
