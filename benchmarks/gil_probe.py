"""`python -m benchmarks.gil_probe`: does one memsvc process use more than one core for reads?

In one process, with no HTTP: the router answers gets and filter searches (what `memsvc serve`
runs per request after the token check, which is included) from 1, 2 and 4 threads. If the work
released the GIL, 2 threads would keep about twice the CPU busy; `cpu/wall` staying where it is
says the work holds the GIL, and only more processes (`memsvc serve --workers N`) add cores.
Read it on an idle machine: on a loaded one the kernel gives a process a share of the cores per
runnable thread, and a thread waiting in SQLite (which releases the GIL) counts as one, so
`cpu/wall` grows with threads there even for work that holds the GIL.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

from benchmarks.bench import _namespace, make_value

__all__ = ["main"]


def run(items: int, requests: int) -> None:
    from memsvc.bootstrap import build_local
    from memsvc.local_server import build_event, stringify_claims

    app = build_local(Path(tempfile.mkdtemp(prefix="memsvc-gil-")), start_workers=False)
    token = app.issuer.mint(sub="bench", tenant="bench")

    def event(method: str, path: str, query: str = "", body: str | None = None) -> dict:
        claims = stringify_claims(app.issuer.verify(token))
        return build_event(method=method, path=path, raw_query=query, headers={"authorization": f"Bearer {token}"},
                           body=body, source_ip="127.0.0.1", authorizer={"jwt": {"claims": claims, "scopes": None}})

    for i in range(items):  # not indexed: the reads measured here use no index
        body = {"namespace": _namespace(i), "key": f"k{i}", "value": make_value(i), "index_fields": False}
        assert app.router.handle(event("PUT", "/v1/memories", body=json.dumps(body)))["statusCode"] == 200

    def get(rng: random.Random) -> dict:
        i = rng.randrange(items)
        return event("GET", "/v1/memories", urlencode([*(("ns", s) for s in _namespace(i)), ("key", f"k{i}")]))

    def filter_search(rng: random.Random) -> dict:
        body = {"namespace_prefix": _namespace(rng.randrange(items)), "filter": {"lang": "en"}, "limit": 10}
        return event("POST", "/v1/memories/search", body=json.dumps(body))

    for name, make, total in (("get", get, requests), ("filter search", filter_search, requests // 4)):
        for threads in (1, 2, 4):
            def work(seed: int, n: int = total // threads) -> None:
                rng = random.Random(seed)
                for _ in range(n):
                    assert app.router.handle(make(rng))["statusCode"] == 200

            pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
            cpu, wall = time.process_time(), time.perf_counter()
            for t in pool:
                t.start()
            for t in pool:
                t.join()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            done = total // threads * threads
            print(f"{name:<14} {threads} threads: {done / wall:7.1f}/s   cpu/wall {cpu / wall:.2f}   "
                  f"cpu per request {1000 * cpu / done:.2f} ms", flush=True)
    app.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gil_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=800, help="gets per thread count (a quarter as many searches)")
    args = parser.parse_args(argv)
    run(args.items, args.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
