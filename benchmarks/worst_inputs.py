"""`python -m benchmarks.worst_inputs`: the time of each worst input issue 22 names, on a fresh
`memsvc serve`, and how soon a bystander's memory is searchable after an attacker's poison writes.

An attacker (tenant `attacker`, a plain user) sends the largest and deepest inputs the API's limits
allow, one at a time, each timed from request to answer (a refusal is an answer). Targets: every
request answers or refuses within 1 s. Then the attacker writes its three costliest values to index
without waiting, at once a bystander (tenant `bystander`) writes a memory, and the time until a
keyword search finds it and it is indexed (the tenant's `pending` is 0) is measured: the
target is 10 s. Last, the bystander's longest read while the attacker keeps the server waiting
(slow policies, puts embedded before they answer): the target is 1 s.

Nothing is asserted: the numbers go to stdout as a table (results in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench import serving
from memsvc.core.typed_memory import MAX_CONTENT_CHARS
from memsvc.service.memories import MAX_NESTING

MAX_QUERY_BODY_CHARS = 200_000
REQUEST_TIMEOUT = 120.0
SEARCHABLE_TIMEOUT = 60.0


def nested(depth: int, leaf: Any = 1, key: str = "a") -> Any:
    """`{"a": {"a": ... leaf}}`, `depth` objects deep."""
    value = leaf
    for _ in range(depth):
        value = {key: value}
    return value


def nested_lists(depth: int) -> Any:
    value: Any = ["x"]
    for _ in range(depth - 1):
        value = [value, "x"]
    return value


def nested_zeros(length: int, depth: int) -> Any:
    """A list of `length` zeros inside `depth` lists."""
    value: Any = [0] * length
    for _ in range(depth):
        value = [value]
    return value


def _cases() -> list[tuple[str, str, str, Callable[[], dict[str, Any]]]]:
    """(name, method, path, body) of each worst input, under the attacker's own namespace."""
    ns = ["user", "mallory", "notes"]
    word = "w" * 8192

    def put(key: str, value: Any, **extra: Any) -> Callable[[], dict[str, Any]]:
        return lambda: {"namespace": ns, "key": key, "value": value, **extra}

    def search(query: str | None = None, **extra: Any) -> Callable[[], dict[str, Any]]:
        body: dict[str, Any] = {"namespace_prefix": ["user", "mallory"], **extra}
        if query is not None:
            body["query"] = query
        return lambda: body

    return [
        ("filter nested 30 deep", "POST", "/v1/memories/search", search(filter={"a": nested(29)})),
        ("filter nested to the limit", "POST", "/v1/memories/search", search(filter={"a": nested(MAX_NESTING - 2)})),
        ("filter: 50 nested in-lists", "POST", "/v1/memories/search",
         search(filter={f"f{i}": {"in": [nested_lists(MAX_NESTING - 4)] * 4} for i in range(50)})),
        ("value nested 28 deep (sync)", "PUT", "/v1/memories", put("deep28", nested(28), sync_index=True)),
        ("value nested to the limit", "PUT", "/v1/memories", put("deep-max", nested(MAX_NESTING - 1))),
        ("value: lists nested to the limit", "PUT", "/v1/memories", put("lists-max", {"l": nested_lists(MAX_NESTING - 1)})),
        ("value: 10,000 fields, one indexed", "PUT", "/v1/memories",
         put("wide", {f"f{i}": f"v{i}" for i in range(10_000)}, index_fields=["f0"], sync_index=True)),
        ("value: one 250 KB word", "PUT", "/v1/memories", put("word", {"text": "a" * 250_000}, sync_index=True)),
        ("value: 250 KB of a-b-c compounds", "PUT", "/v1/memories",
         put("compound", {"text": "a-" * 125_000}, sync_index=True)),
        ("value: 250 KB of digits (PII shapes)", "PUT", "/v1/memories",
         put("digits", {"text": "1" * 250_000}, sync_index=True)),
        ("value: 250 KB of dots and @", "PUT", "/v1/memories",
         put("emailish", {"text": "a.@" * 80_000}, sync_index=True)),
        ("value: 64 paths into one 120,000-long list", "PUT", "/v1/memories",
         put("paths", {"a": nested_zeros(120_000, 28)},
             index_fields=(["a" + "[*]" * k for k in range(29)] + ["a" + "[0]" * k + "[*]" * (28 - k)
                                                                  for k in range(1, 29)] + ["a[-1]"] * 7))),
        ("value: 64 names over 87,000 elements", "PUT", "/v1/memories",
         put("names", {"a": [{} for _ in range(87_000)]}, index_fields=[f"a[*].k{i}" for i in range(64)])),
        ("value: extreme floats", "PUT", "/v1/memories",
         put("floats", {"max": 1.7976931348623157e308, "min": 5e-324, "neg": -1.7976931348623157e308})),
        ("value: a 4,300-digit integer", "PUT", "/v1/memories", put("bigint", {"n": int("9" * 4300)})),
        ("query: one word of 8,192 chars", "POST", "/v1/memories/search", search(word, mode="keyword")),
        ("query: one word of 50,000 chars", "POST", "/v1/memories/search", search("w" * 50_000, mode="keyword")),
        ("query: one word of 200,000 chars", "POST", "/v1/memories/search", search("w" * MAX_QUERY_BODY_CHARS)),
        ("query: 200,000 chars of a-a-a", "POST", "/v1/memories/search", search("a-" * (MAX_QUERY_BODY_CHARS // 2))),
        ("recall: one word of 200,000 chars", "POST", "/v1/memories/recall",
         lambda: {"query": "w" * MAX_QUERY_BODY_CHARS, "namespace_prefix": ["user", "mallory"]}),
        ("remember: Capitalised Names at the limit", "POST", "/v1/memories/remember",
         lambda: {"type": "fact", "content": " ".join(["Alpha Beta Gamma Delta"] * (MAX_CONTENT_CHARS // 23))}),
        ("graph find: 50 names of 200 chars", "POST", "/v1/graph/entities/find",
         lambda: {"namespace_prefix": ["user", "mallory"], "names": ["N-" * 100] * 50}),
        ("query: 200,000 combining marks", "POST", "/v1/memories/search", search("a" + "\u0301" * 199_999)),
    ]


def measure(url: str, tokens: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT) as client:
        attacker = {"Authorization": f"Bearer {tokens['attacker']}"}
        for name, method, path, body in _cases():
            payload = json.dumps(body(), separators=(",", ":"), ensure_ascii=False).encode()
            started = time.perf_counter()
            try:
                r = client.request(method, path, content=payload, headers=attacker)
                status, code = r.status_code, (r.json().get("error", {}).get("code") if r.status_code >= 400 else "")
            except httpx.TimeoutException:
                status, code = None, "no answer"
            seconds = time.perf_counter() - started
            rows.append({"input": name, "bytes": len(payload), "status": status, "code": code, "seconds": seconds})
            print(f"{name:>38}: {status} {code or '':<18} {seconds * 1000:9.1f} ms", file=sys.stderr)
        rows.append(_bystander(client, tokens))
        rows += _held_up(url, tokens)
    return rows


def _held_up(url: str, tokens: dict[str, str]) -> list[dict[str, Any]]:
    """The bystander's longest `GET` of one memory (one after another, all along) while the
    attacker sends two requests at once that keep the server waiting: two policy checks that
    take their whole compile deadline, then two LangGraph puts of 64 long fields, each embedded
    before it answers. Each was once the whole server's: both request threads waited on them."""
    attacker = {"Authorization": f"Bearer {tokens['attacker']}"}
    attacker_admin = {"Authorization": f"Bearer {tokens['attacker_admin']}"}
    bystander = {"Authorization": f"Bearer {tokens['bystander']}"}
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT) as client:
        client.put("/v1/memories", headers=bystander, json={"namespace": ["user", "bob", "notes"], "key": "read",
                                                            "value": {"text": "read me"}}).raise_for_status()
        bundle = client.get("/admin/v1/memories/policies", headers=attacker_admin).json()["policies"]
    slow_policy = {"policies": {**bundle, "extra.rego": "package memories.extra\n\nx := " + "[" * 16 + "1" + "]" * 16}}
    words = [f"{w}{n}" for w in ("alpha", "river", "stone", "cloud", "omega") for n in range(100)]
    long_fields = {f"f{i}": " ".join(words[(i * 7 + j * 13) % len(words)] for j in range(500)) for i in range(64)}
    attacks = {
        "2 slow policy compiles (admin, dry run)":
            lambda c, n: c.put("/admin/v1/memories/policies", params={"dry_run": "true"}, headers=attacker_admin,
                               json=slow_policy),
        "2 LangGraph puts of 64 fields of 500 words":
            lambda c, n: c.put("/store/items", headers=attacker,
                               json={"namespace": ["user", "mallory", "lg"], "key": f"wide-{n}", "value": long_fields}),
    }
    rows = []
    for name, attack in attacks.items():
        stop, longest, reads = threading.Event(), [0.0], [0]

        def read() -> None:
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT) as c:
                while not stop.is_set():
                    started = time.perf_counter()
                    c.get("/v1/memories", headers=bystander,
                          params={"ns": ["user", "bob", "notes"], "key": "read"}).raise_for_status()
                    longest[0], reads[0] = max(longest[0], time.perf_counter() - started), reads[0] + 1

        def attack_once(n: int) -> int:
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT) as c:
                return attack(c, n).status_code

        reader = threading.Thread(target=read)
        reader.start()
        with ThreadPoolExecutor(2) as pool:
            statuses = list(pool.map(attack_once, range(2)))
        stop.set()
        reader.join()
        print(f"{name:>38}: answers {statuses}; the bystander's longest of {reads[0]} GETs "
              f"{longest[0] * 1000:.1f} ms", file=sys.stderr)
        rows.append({"input": f"bystander's longest GET during {name}", "bytes": 0,
                     "status": 200, "code": "", "seconds": longest[0]})
    return rows


def _bystander(client: httpx.Client, tokens: dict[str, str]) -> dict[str, Any]:
    """The attacker's costliest values to index, written without waiting for the indexer, then at
    once the bystander's write, then keyword searches until it is found (every 50 ms)."""
    attacker = {"Authorization": f"Bearer {tokens['attacker']}"}
    for key, text in (("poison-1", "a-" * 125_000), ("poison-2", "a.@" * 80_000), ("poison-3", "1" * 250_000)):
        client.put("/v1/memories", headers=attacker, json={"namespace": ["user", "mallory", "notes"], "key": key,
                                                          "value": {"text": text}}).raise_for_status()
    headers = {"Authorization": f"Bearer {tokens['bystander']}"}
    admin = {"Authorization": f"Bearer {tokens['bystander_admin']}"}
    ns = ["user", "bob", "notes"]
    started = time.perf_counter()
    client.put("/v1/memories", headers=headers,
               json={"namespace": ns, "key": "k", "value": {"text": "bystander quokka marmalade"}}).raise_for_status()
    found = None
    while time.perf_counter() - started < SEARCHABLE_TIMEOUT:
        # Indexed, not only found: a search also reads what the indexer has not reached yet.
        indexed = client.get("/admin/v1/memories/index/status", headers=admin).json()["pending"] == 0
        r = client.post("/v1/memories/search", headers=headers,
                        json={"namespace_prefix": ["user", "bob"], "query": "quokka", "mode": "keyword"})
        if indexed and r.status_code == 200 and r.json().get("items"):
            found = time.perf_counter() - started
            break
        time.sleep(0.05)
    print(f"{'bystander searchable after':>38}: {'%.2f s' % found if found is not None else 'never'}", file=sys.stderr)
    return {"input": "bystander's memory searchable", "bytes": 0, "status": 200 if found else None,
            "code": "" if found else "not found", "seconds": found if found is not None else SEARCHABLE_TIMEOUT}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    from memsvc.adapters.local.issuer import LocalIssuer

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        with serving(data_dir, args.port) as url:
            issuer = LocalIssuer(data_dir / "keys")
            tokens = {"attacker": issuer.mint(sub="mallory", tenant="attacker"),
                      "attacker_admin": issuer.mint(sub="root", tenant="attacker", roles=["admin"]),
                      "bystander": issuer.mint(sub="bob", tenant="bystander"),
                      "bystander_admin": issuer.mint(sub="ops", tenant="bystander", roles=["admin"])}
            rows = measure(url, tokens)
    print("| input | request bytes | answer | time |")
    print("|---|---|---|---|")
    for row in rows:
        answer = f"{row['status']} {row['code']}".strip() if row["status"] else row["code"]
        print(f"| {row['input']} | {row['bytes']:,} | {answer} | {row['seconds'] * 1000:,.1f} ms |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
