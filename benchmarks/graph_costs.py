"""What the knowledge graph costs on AWS per memory, on moto: `python -m benchmarks.graph_costs`.

DynamoDB capacity is computed from the items by DynamoDB's rules (`keyword_costs.CapacityMeter`:
moto reports a constant per call), on-demand at us-east-1's prices. For a memory naming `E`
entities and `R` relations (a small one, a typical one, and the per-memory caps), it measures the
write and read units to derive the memory's graph, to replace it by a version naming other
entities, to replay a change (nothing written), and to delete it; and what one hop of a traversal
reads. Entity extraction's Bedrock cost is computed from token counts: the system prompt's and
the text's characters / 4 (a rule of thumb for English, not a tokenizer), and the output JSON's,
at Amazon Nova Micro's on-demand prices.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from benchmarks.keyword_costs import READ_PRICE, WRITE_PRICE, CapacityMeter

TABLE = "memsvc-graph-costs"
NAMESPACE = ("user", "alice", "notes")
# Amazon Nova Micro, on demand, us-east-1: $ per input and output token.
INPUT_TOKEN_PRICE = 0.035 / 1e6
OUTPUT_TOKEN_PRICE = 0.14 / 1e6
SHAPES = (("small", 2, 1, 20), ("typical", 5, 4, 100), ("at the caps", 16, 24, 1000))  # E, R, words


@contextmanager
def _store() -> Iterator[tuple[Any, CapacityMeter]]:
    from moto import mock_aws

    from memsvc.adapters.aws.dynamo_graph import DynamoGraphStore
    from memsvc.adapters.aws.dynamo_keywords import keyword_table_definition
    from tests.fakes.aws_stack import _item_rollback_transactions, moto_client

    with mock.patch.dict(os.environ, {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}):
        with mock_aws(), _item_rollback_transactions():
            client = moto_client("dynamodb")
            client.create_table(**keyword_table_definition(TABLE))
            meter = CapacityMeter(client)
            yield DynamoGraphStore(meter, TABLE), meter


def _entity(tag: str, n: int) -> str:
    """An entity id as the service makes them: 32 hex digits."""
    return hashlib.sha256(f"{tag}/{n}".encode()).hexdigest()[:32]


def _memory(tag: str, key: str, version: int, entities: int, relations: int, ids: list[str] | None = None):
    """A memory naming `entities` entities (ids from `tag`, or `ids`) and `relations` edges among them."""
    from memsvc.core.graph import DerivedMemory, GraphEdge, GraphNode

    memory = DerivedMemory("acme", NAMESPACE, key, f"{key}-v{version}", version)
    ids = ids or [_entity(tag, n) for n in range(entities)]
    nodes = [GraphNode("acme", NAMESPACE, e, "CONCEPT", os.urandom(60)) for e in ids]  # a sealed ~20-char name
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]][:relations]
    edges = [GraphEdge("acme", NAMESPACE, a, "RELATES_TO", b, key, memory.memory_id) for a, b in pairs]
    return memory, nodes, edges


def _measured(meter: CapacityMeter, run: Any) -> dict[str, float]:
    meter.reset()
    run()
    return {"write_units": meter.write_units, "read_units": meter.read_units,
            "dollars_per_million": round((meter.write_units * WRITE_PRICE + meter.read_units * READ_PRICE) * 1e6, 2)}


def measure() -> dict[str, Any]:
    from memsvc.adapters.aws.bedrock_extractor import SYSTEM_PROMPT

    out: dict[str, Any] = {}
    with _store() as (store, meter):
        for name, entities, relations, words in SHAPES:
            key = f"memory-{name}"
            first = _memory("a", key, 1, entities, relations)
            second = _memory("b", key, 2, entities, relations)
            deleted = _memory("b", key, 3, 0, 0)[0]
            input_tokens = (len(SYSTEM_PROMPT) + words * 6) / 4
            output_json = json.dumps({"entities": [{"name": "Project Name", "type": "CONCEPT"}] * entities,
                                      "relations": [{"source": "Project Name", "target": "Other Name",
                                                     "type": "RELATES_TO"}] * relations})
            output_tokens = len(output_json) / 4
            out[name] = {
                "entities": entities, "relations": relations, "words": words,
                "derive": _measured(meter, lambda: store.replace_memory(*first)),
                "replay": _measured(meter, lambda: store.replace_memory(*first)),
                "replace": _measured(meter, lambda: store.replace_memory(*second)),
                "delete": _measured(meter, lambda: store.remove_memory(deleted)),
                "extraction": {"input_tokens": round(input_tokens), "output_tokens": round(output_tokens),
                               "dollars_per_million": round((input_tokens * INPUT_TOKEN_PRICE
                                                             + output_tokens * OUTPUT_TOKEN_PRICE) * 1e6, 2)},
            }
        # One hop from an entity that 100 typical memories name (each with 4 others of its own).
        hub = _entity("hub", 0)
        for n in range(100):
            store.replace_memory(*_memory("", f"hub-{n}", 1, 5, 4, [hub] + [_entity(f"h{n}x", i) for i in range(4)]))
        out["hop"] = {
            "from an entity 100 memories name": _measured(
                meter, lambda: store.expand("acme", ("user", "alice"), [hub], limit=10_000)),
            "from an entity 1 memory names": _measured(
                meter, lambda: store.expand("acme", ("user", "alice"), [_entity("h50x", 1)], limit=100)),
        }
    return out


def report(results: dict[str, Any]) -> str:
    lines = ["| Memory | E / R | Derive: WU | Replace: WU + RU | Delete: WU + RU | Replay: RU | Extraction tokens "
             "in / out | $ per 1M memories (derive + delete + extraction) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        if name == "hop":
            continue
        total = r["derive"]["dollars_per_million"] + r["delete"]["dollars_per_million"] \
            + r["extraction"]["dollars_per_million"]
        lines.append(f"| {name} ({r['words']} words) | {r['entities']} / {r['relations']} | "
                     f"{r['derive']['write_units']:.0f} | {r['replace']['write_units']:.0f} + "
                     f"{r['replace']['read_units']:.1f} | {r['delete']['write_units']:.0f} + "
                     f"{r['delete']['read_units']:.1f} | {r['replay']['read_units']:.1f} | "
                     f"{r['extraction']['input_tokens']} / {r['extraction']['output_tokens']} | {total:.2f} |")
    lines.append("")
    for name, r in results["hop"].items():
        lines.append(f"One hop {name}: {r['read_units']:.1f} read units (${r['dollars_per_million']:.2f} per million)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    args = parser.parse_args(argv)
    results = measure()
    print(json.dumps(results, indent=2) if args.json else report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
