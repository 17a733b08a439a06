"""Export and import (issue 26) as client methods (`/admin/v1/exports`, `/admin/v1/imports`; an
admin's token). `MemsvcClient` and `AsyncMemsvcClient` take the one-request methods from
`TransferMethods`; `export_to_file` and `import_file` drive a whole job with a `MemsvcClient`.

An export runs as a job on the server: start it, read its progress until its state is `done`,
then download its file part by part (the file is the parts' bytes in order). An import uploads
the file in parts of `PART_BYTES`, then starts: the server checks the whole file before it writes
anything. The file format is docs/export-format.md."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["TransferMethods", "export_to_file", "import_file", "TransferFailed", "PART_BYTES"]

PART_BYTES = 256 * 1024  # what the server takes per uploaded part


class TransferFailed(Exception):
    """The job ended in state `failed`; `error` is the server's error body."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.error = job.get("error") or {}
        super().__init__(f"{job.get('kind')} {job.get('id')} failed: {self.error.get('code')}: "
                         f"{self.error.get('message')}")


class TransferMethods:
    _run: Callable[[tuple[Any, ...]], Any]

    def start_export(self, *, prefix: Sequence[str] | None = None, user_id: str | None = None,
                     passphrase: str | None = None, kms_key_id: str | None = None, encrypt: bool = True) -> Any:
        """`POST /admin/v1/exports`: the tenant, a namespace `prefix` or one user's layers
        (`user_id`), sealed under `passphrase` or `kms_key_id` unless `encrypt=False`."""
        scope = {k: v for k, v in (("prefix", list(prefix) if prefix is not None else None),
                                   ("user_id", user_id)) if v is not None}
        body = {"scope": scope, "encrypt": encrypt,
                **{k: v for k, v in (("passphrase", passphrase), ("kms_key_id", kms_key_id)) if v is not None}}
        return self._run(("POST", "/admin/v1/exports", (), body))

    def export_status(self, job_id: str) -> Any:
        return self._run(("GET", f"/admin/v1/exports/{job_id}", (), None))

    def export_part(self, job_id: str, index: int) -> Any:
        """`{"index", "parts", "data"}` (`data`: base64) of a finished export."""
        return self._run(("GET", f"/admin/v1/exports/{job_id}/parts", (("index", str(index)),), None))

    def create_import(self, *, dry_run: bool = False, allow_other_tenant: bool = False) -> Any:
        return self._run(("POST", "/admin/v1/imports", (),
                          {"dry_run": dry_run, "allow_other_tenant": allow_other_tenant}))

    def put_import_part(self, job_id: str, index: int, data: bytes) -> Any:
        return self._run(("PUT", f"/admin/v1/imports/{job_id}/parts", (),
                          {"index": index, "data": base64.b64encode(data).decode("ascii")}))

    def start_import(self, job_id: str, *, parts: int, passphrase: str | None = None) -> Any:
        body: dict[str, Any] = {"parts": parts}
        if passphrase is not None:
            body["passphrase"] = passphrase
        return self._run(("POST", f"/admin/v1/imports/{job_id}/start", (), body))

    def import_status(self, job_id: str) -> Any:
        return self._run(("GET", f"/admin/v1/imports/{job_id}", (), None))


def _wait(read: Callable[[], dict[str, Any]], *, timeout: float, poll: float,
          progress: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = read()
        if progress is not None:
            progress(job)
        if job["state"] == "done":
            return job
        if job["state"] == "failed":
            raise TransferFailed(job)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{job['kind']} {job['id']} is still {job['state']} after {timeout:.0f} s")
        time.sleep(poll)


def export_to_file(client: Any, path: str | Path, *, timeout: float = 3600.0, poll: float = 0.5,
                   progress: Callable[[dict[str, Any]], None] | None = None, **scope_and_key: Any) -> dict[str, Any]:
    """Export (`TransferMethods.start_export`'s arguments) and write the file to `path`; the
    finished job."""
    started = client.start_export(**scope_and_key)
    job = _wait(lambda: client.export_status(started["id"]), timeout=timeout, poll=poll, progress=progress)
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    with open(partial, "wb") as out:
        for index in range(job["parts"]):
            out.write(base64.b64decode(client.export_part(job["id"], index)["data"]))
    partial.replace(target)
    return job


def import_file(client: Any, path: str | Path, *, passphrase: str | None = None, dry_run: bool = False,
                allow_other_tenant: bool = False, timeout: float = 3600.0, poll: float = 0.5,
                progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Upload the file at `path` and import it; the finished job (its `counts` say what changed,
    or with `dry_run`, what would)."""
    job = client.create_import(dry_run=dry_run, allow_other_tenant=allow_other_tenant)
    parts = 0
    with open(path, "rb") as source:
        while chunk := source.read(PART_BYTES):
            client.put_import_part(job["id"], parts, chunk)
            parts += 1
    if parts == 0:
        raise ValueError(f"{path} is empty")
    client.start_import(job["id"], parts=parts, passphrase=passphrase)
    return _wait(lambda: client.import_status(job["id"]), timeout=timeout, poll=poll, progress=progress)
