"""Entity extraction on AWS: one Bedrock Converse call per memory text to a small model (Amazon
Nova Micro by default, `AwsSettings.extraction_model_id`), off the write path, in the indexer.

The prompt is bounded: the text is cut to `MAX_TEXT_CHARS`, the answer is asked for as one JSON
object of at most `MAX_ENTITIES` entities and `MAX_RELATIONS` relations, and `maxTokens` bounds
what the model may write (and what it costs). Temperature 0: the same text gives the same graph.

What can go wrong, and what happens:
- throttling, a timeout, a 5xx: botocore's retry mode on the client (`AwsClients.extractor_runtime`,
  adaptive, several attempts) retries; once they are spent the call raises `RateLimited` or
  `ProviderError` (both retryable), the indexer reports the change as failed, and the stream
  mapping delivers it again later. Nothing is lost.
- a request Bedrock refuses as invalid: no other attempt can succeed, so the memory gets no
  graph (counted as `rejected`), as it would for a malformed answer.
- an answer that is not the JSON asked for (prose, cut off by `maxTokens`, wrong shapes): no
  graph for that memory, counted as `malformed`. Never a crash, never a retry loop.
- an answer with more than the caps: the first entities and relations are kept.
What failed is logged by code only: never the text.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import aws_error, error_code
from memsvc.core.errors import InvalidArgument
from memsvc.core.graph import (ENTITY_TYPES, MAX_ENTITIES_PER_MEMORY, MAX_RELATIONS_PER_MEMORY,
                               RELATION_TYPES, Extraction, entity_type, normalise_name, relation_type)

__all__ = ["BedrockExtractor", "SYSTEM_PROMPT", "MAX_TEXT_CHARS", "MAX_ENTITIES", "MAX_RELATIONS", "MAX_TOKENS",
           "parse_extraction"]

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 8000  # ~2,000 input tokens; what the graph indexer hands over (MAX_EXTRACTED_CHARS)
MAX_ENTITIES = MAX_ENTITIES_PER_MEMORY  # what one memory may derive (core.graph)
MAX_RELATIONS = MAX_RELATIONS_PER_MEMORY
# 16 entities (~12 tokens each) and 24 relations (~18 each) are ~630 tokens of compact JSON.
MAX_TOKENS = 700
SYSTEM_PROMPT = (
    "You extract a knowledge graph from one memory of an AI agent. Answer with one JSON object and nothing else: "
    '{"entities": [{"name": "...", "type": "..."}], "relations": [{"source": "...", "target": "...", '
    '"type": "..."}]}. '
    f"At most {MAX_ENTITIES} entities and {MAX_RELATIONS} relations. An entity is a named thing in the text "
    "(a person, organisation, project, system, place, event, ticket code, concept); write its name as in the "
    f"text; its type is one of {', '.join(ENTITY_TYPES)}. A relation links two of the entities you listed, by "
    f"name; its type is one of {', '.join(RELATION_TYPES)} (CAUSED_BY: the source was caused by the target; "
    "RELATES_TO when the text links them without saying how). Only what the text states; no pronouns, dates or "
    'numbers as entities. No entities: {"entities": [], "relations": []}.'
)


def parse_extraction(response: dict[str, Any]) -> Extraction | None:
    """The extraction in a Converse response, capped; None if it holds no such JSON object.

    Entities are kept when their name normalises (`core.graph.normalise_name`: not empty, at most
    `core.graph.MAX_NAME_CHARS`), their type mapped into the vocabulary (`CONCEPT` otherwise); duplicates (by
    normalised name) once. Relations are kept when both ends are names, their type mapped into the
    vocabulary (`RELATES_TO` otherwise); an end the answer did not list as an entity is added by the
    graph indexer as a CONCEPT; a relation of an entity to itself is dropped. O(size of the
    response), which `MAX_TOKENS` bounds."""
    content = response.get("output", {}).get("message", {}).get("content") or []
    text = "".join(block.get("text", "") for block in content if isinstance(block, dict))
    start, end = text.find("{"), text.rfind("}")  # models like to wrap it in ```json fences
    if start < 0 or end < start:
        return None
    try:
        answer = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("entities"), list) \
            or not isinstance(answer.get("relations", []), list):
        return None
    entities: dict[str, tuple[str, str]] = {}
    for entity in answer["entities"]:
        if len(entities) == MAX_ENTITIES:
            break
        if not isinstance(entity, dict):
            continue
        name, kind = entity.get("name"), entity.get("type")
        key = _normalised(name)
        if key is not None and key not in entities:
            entities[key] = (name.strip(), entity_type(kind if isinstance(kind, str) else None))
    relations: list[tuple[str, str, str]] = []
    for relation in answer.get("relations", []):
        if len(relations) == MAX_RELATIONS:
            break
        if not isinstance(relation, dict):
            continue
        source, target, kind = relation.get("source"), relation.get("target"), relation.get("type")
        a, b = _normalised(source), _normalised(target)
        if a is None or b is None or a == b:
            continue
        relations.append((entities.get(a, (source.strip(),))[0], entities.get(b, (target.strip(),))[0],
                          relation_type(kind if isinstance(kind, str) else None)))
    return Extraction(entities=tuple(entities.values()), relations=tuple(relations))


def _normalised(name: Any) -> str | None:
    if not isinstance(name, str):
        return None
    try:
        return normalise_name(name)
    except InvalidArgument:  # empty, or too long to be a name
        return None


class BedrockExtractor:
    """`EntityExtractor` on Bedrock Converse. `client` is a `bedrock-runtime` client with retries
    of its own (`AwsClients.extractor_runtime`). Thread-safe; `stats()` counts what happened."""

    def __init__(self, client: Any, model_id: str) -> None:
        self._client = client
        self._model_id = model_id
        self._lock = threading.Lock()
        self._stats = {"calls": 0, "malformed": 0, "rejected": 0, "failed": 0, "input_tokens": 0, "output_tokens": 0}

    def extract(self, text: str) -> Extraction:
        if not text.strip():
            return Extraction()
        try:
            response = self._client.converse(
                modelId=self._model_id,
                system=[{"text": SYSTEM_PROMPT}],
                messages=[{"role": "user", "content": [{"text": text[:MAX_TEXT_CHARS]}]}],
                inferenceConfig={"maxTokens": MAX_TOKENS, "temperature": 0.0},
            )
        except (ClientError, BotoCoreError) as exc:
            error = aws_error(exc, service="Bedrock", operation="Converse")
            if isinstance(error, InvalidArgument):  # no other attempt can succeed: no graph
                self._count(calls=1, rejected=1)
                log.warning("entity extraction refused; no graph for this memory",
                            extra={"model_id": self._model_id, "error": error_code(exc)})
                return Extraction()
            self._count(calls=1, failed=1)
            raise error from None  # retryable: the indexer's batch is delivered again
        usage = response.get("usage") or {}
        self._count(calls=1, input_tokens=int(usage.get("inputTokens", 0)),
                    output_tokens=int(usage.get("outputTokens", 0)))
        extraction = parse_extraction(response)
        if extraction is None:
            self._count(malformed=1)
            log.warning("entity extraction gave no usable answer; no graph for this memory",
                        extra={"model_id": self._model_id, "stop_reason": response.get("stopReason")})
            return Extraction()
        return extraction

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._stats)

    def _count(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._stats[name] += amount
