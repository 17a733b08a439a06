"""The two questions the service asks a small model besides learning from conversations: the
same-fact judge's (seed 002) and the knowledge graph's entity extraction (issue 15). Their
prompts and the reading of their answers live here, once: the Bedrock adapters
(`adapters.aws.bedrock_judge`, `bedrock_extractor`) send them through their own Converse calls,
and `LlmJudge` and `LlmEntityExtractor` through any `LanguageModel` (the local endpoint the
operator names, `MEMSVC_LLM_URL`).

Both prompts are bounded (the statements and the text are cut) and ask for one JSON object; the
answers are read defensively: anything not asked for is dropped, never trusted. What failed is
logged by reason only: never a statement or a text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from memsvc.core.errors import InvalidArgument, ProviderError
from memsvc.core.graph import (ENTITY_TYPES, MAX_ENTITIES_PER_MEMORY, MAX_RELATIONS_PER_MEMORY,
                               RELATION_TYPES, Extraction, entity_type, normalise_name, relation_type)
from memsvc.core.same_fact import Verdict
from memsvc.core.typed_memory import TypedMemory
from memsvc.ports import LanguageModel

__all__ = ["LlmJudge", "LlmEntityExtractor", "JUDGE_SYSTEM_PROMPT", "JUDGE_MAX_TOKENS", "MAX_STATEMENT_CHARS",
           "judge_prompt", "verdict_of", "EXTRACTION_SYSTEM_PROMPT", "EXTRACTION_MAX_TOKENS", "MAX_TEXT_CHARS",
           "MAX_ENTITIES", "MAX_RELATIONS", "extraction_of"]

log = logging.getLogger(__name__)

# -- the same-fact judge ------------------------------------------------------------------------

MAX_STATEMENT_CHARS = 1000
JUDGE_MAX_TOKENS = 40  # {"same_fact": false, "contradiction": false} is about 15 tokens
JUDGE_SYSTEM_PROMPT = (
    "You compare two short memories about a user. Answer with one JSON object and nothing else: "
    '{"same_fact": true|false, "contradiction": true|false}. same_fact: B states the same fact as A '
    "(possibly reworded or refined). contradiction: B is about the same subject as A but gives a "
    "different value (a moved city, a changed number or date, a reversed preference), so B replaces A. "
    "Both false when they are about different things."
)


def judge_prompt(existing: TypedMemory, candidate: TypedMemory) -> str:
    def line(name: str, m: TypedMemory) -> str:
        category = f" (category: {m.category[:64]})" if m.category else ""
        return f"{name}{category}: {m.content[:MAX_STATEMENT_CHARS]}"

    return f"{line('A', existing)}\n{line('B', candidate)}"


def verdict_of(answer: Any) -> Verdict | None:
    """The verdict in the judge's JSON answer, or None if it is not the object asked for."""
    if not isinstance(answer, dict):
        return None
    same, contradiction = answer.get("same_fact"), answer.get("contradiction", False)
    if not isinstance(same, bool) or not isinstance(contradiction, bool):
        return None
    return Verdict("contradiction" if contradiction else "same" if same else "different")


class LlmJudge:
    """`SameFactJudge` on a `LanguageModel`. Any failure is no answer (remember then creates a
    new memory: never lost, never merged on a guess). `model_id_of(tenant)`: a tenant's model,
    None for the deployment's."""

    def __init__(self, llm: LanguageModel, model_id_of: Callable[[str], str | None] = lambda tenant: None) -> None:
        self._llm = llm
        self._model_id_of = model_id_of

    def judge(self, tenant: str, existing: TypedMemory, candidate: TypedMemory) -> Verdict | None:
        try:
            answer = self._llm.chat_json(JUDGE_SYSTEM_PROMPT, [("user", judge_prompt(existing, candidate))],
                                         max_tokens=JUDGE_MAX_TOKENS, model_id=self._model_id_of(tenant))
        except Exception as exc:  # the judge sits on remember's path: whatever failed, no answer
            log.warning("the same-fact judge failed; creating a new memory", extra={"error": _reason(exc)})
            return None
        verdict = verdict_of(answer)
        if verdict is None:
            log.warning("the same-fact judge gave no usable answer; creating a new memory")
        return verdict


# -- the knowledge graph's entity extraction ----------------------------------------------------

MAX_TEXT_CHARS = 8000  # ~2,000 input tokens; what the graph indexer hands over (MAX_EXTRACTED_CHARS)
MAX_ENTITIES = MAX_ENTITIES_PER_MEMORY  # what one memory may derive (core.graph)
MAX_RELATIONS = MAX_RELATIONS_PER_MEMORY
# 16 entities (~12 tokens each) and 24 relations (~18 each) are ~630 tokens of compact JSON.
EXTRACTION_MAX_TOKENS = 700
EXTRACTION_SYSTEM_PROMPT = (
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


def extraction_of(answer: Any) -> Extraction | None:
    """The extraction in the extractor's JSON answer, capped; None if it is not the object asked for.

    Entities are kept when their name normalises (`core.graph.normalise_name`: not empty, at most
    `core.graph.MAX_NAME_CHARS`), their type mapped into the vocabulary (`CONCEPT` otherwise); duplicates (by
    normalised name) once. Relations are kept when both ends are names, their type mapped into the
    vocabulary (`RELATES_TO` otherwise); an end the answer did not list as an entity is added by the
    graph indexer as a CONCEPT; a relation of an entity to itself is dropped. O(size of the answer)."""
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


class LlmEntityExtractor:
    """`EntityExtractor` on a `LanguageModel`, in the indexer (off the write path). Throttling
    and provider failures are raised (the indexer retries the change later); an answer that
    cannot be read is no graph for that memory (asking again would not help)."""

    def __init__(self, llm: LanguageModel) -> None:
        self._llm = llm

    def extract(self, text: str) -> Extraction:
        if not text.strip():
            return Extraction()
        try:
            answer = self._llm.chat_json(EXTRACTION_SYSTEM_PROMPT, [("user", text[:MAX_TEXT_CHARS])],
                                         max_tokens=EXTRACTION_MAX_TOKENS)
        except ProviderError as error:
            if error.details.get("reason") != "malformed":
                raise
            answer = None
        extraction = extraction_of(answer)
        if extraction is None:
            log.warning("entity extraction gave no usable answer; no graph for this memory")
            return Extraction()
        return extraction


def _reason(exc: Exception) -> str:
    """What failed, in our words: the error's reason or class, never its message."""
    details = getattr(exc, "details", None)
    reason = details.get("reason") if isinstance(details, dict) else None
    return reason if isinstance(reason, str) else type(exc).__name__
