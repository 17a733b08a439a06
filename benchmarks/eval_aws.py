"""`python -m benchmarks.eval_aws [memsvc eval options]`: `memsvc eval` against a throwaway server
on the AWS backend (moto's DynamoDB, Streams, S3 Vectors and KMS, with the local MiniLM embedder:
tests/fakes/aws_server.py).

`memsvc eval --serve` covers the local backend. This one needs a repo checkout, because the fake
AWS stack lives in tests/. Every option after the module name goes to `memsvc eval`, except
--url, --data-dir, --serve and the tokens, which this script sets, and `--titan`, which embeds
with the production TitanEmbedder against the Titan fake (a hashed bag of words) instead of
MiniLM. Example:
    python -m benchmarks.eval_aws --titan --split test --report eval-aws.json
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from memsvc.cli import main as memsvc
from tests.conftest import start_server, stop_server


def main(argv: list[str]) -> int:
    backend = "aws-titan" if "--titan" in argv else "aws"
    argv = [a for a in argv if a != "--titan"]
    with tempfile.TemporaryDirectory(prefix="memsvc-eval-aws-") as tmp:
        server = start_server(Path(tmp) / "data", backend)
        try:
            return memsvc(["eval", "--url", server.url, "--data-dir", str(server.data_dir), "--no-cleanup", *argv])
        finally:
            stop_server(server)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
