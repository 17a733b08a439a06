"""`memsvc serve`'s log lines carry the fields a log call passes as `extra` (API-AGENT.md: every
recall is logged with its request id, a hash of its query, its result count and its latency), as
the JSON logs on Lambda do; a plain format string drops them."""

from __future__ import annotations

import io
import logging

from memsvc.cli import _WithExtras


def _logged(emit) -> str:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(_WithExtras("%(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger("memsvc.test.serve_log_lines")
    log.addHandler(handler)
    log.propagate = False
    try:
        emit(log)
    finally:
        log.removeHandler(handler)
    return out.getvalue()


def test_a_recall_line_carries_its_extra_fields():
    line = _logged(lambda log: log.warning("recall", extra={
        "request_id": "req-42", "query_sha256": "0123456789abcdef", "result_count": 3, "latency_ms": 4.5}))
    assert line == ("WARNING memsvc.test.serve_log_lines: recall request_id=req-42 query_sha256=0123456789abcdef"
                    " result_count=3 latency_ms=4.5\n")


def test_a_line_without_extra_fields_is_the_plain_format_and_a_traceback_follows_the_fields():
    assert _logged(lambda log: log.warning("plain")) == "WARNING memsvc.test.serve_log_lines: plain\n"

    def failing(log):
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed", extra={"seq": 7})

    first, *rest = _logged(failing).splitlines()
    assert first == "ERROR memsvc.test.serve_log_lines: failed seq=7"
    assert rest[0].startswith("Traceback") and rest[-1] == "ValueError: boom"
