"""A stand-in for a small model behind Bedrock's Converse API, on a real boto3
`bedrock-runtime` client (the same `before-call` technique as `tests/fakes/titan.py`).

botocore validates every request against the real Converse model before this fake sees it, so
a wrong parameter (a bad `inferenceConfig`, a missing `messages`) fails as it would against AWS.
The fake then answers with the response shape Converse returns, as recorded from Amazon Nova
Micro (`RECORDED_*` below: `output.message.content[].text`, `stopReason`, `usage`, `metrics`),
with one of:
- `answer="heuristic"` (the default): the JSON the judge prompt asks for, decided by the
  deterministic judge (`core.same_fact`) on the prompt's two statements: a model that agrees
  with the heuristics. To the entity extractor's prompt (`bedrock_extractor.SYSTEM_PROMPT`), the
  JSON it asks for, of what the local `PatternExtractor` finds in the text: so the knowledge
  graph's contract tests get the same graph on both backends. To the memory extractor's prompt
  (`llm_extraction.SYSTEM_PROMPT`), the memories the local patterns (`core.memory_patterns`)
  find in the conversation's lines. It is no model: what it tests is the adapter around the call.
- `answer=<text>`: that text verbatim (fenced JSON, prose, a truncated object ...).
- `fail=<code>`: the modelled error Bedrock sends (`ThrottlingException`, `AccessDeniedException`,
  `ModelTimeoutException`, ...); `fail="timeout"`: botocore's `ReadTimeoutError`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from memsvc.adapters.aws.bedrock_extractor import SYSTEM_PROMPT as EXTRACTION_PROMPT
from memsvc.adapters.local.pattern_extractor import PatternExtractor
from memsvc.core.extraction import ConversationMessage
from memsvc.core.memory_patterns import find_memories
from memsvc.core.same_fact import judge_statements
from memsvc.service.llm_extraction import SYSTEM_PROMPT as MEMORY_PROMPT

__all__ = ["ConverseFake", "install_converse_fake", "RECORDED_PLAIN", "RECORDED_FENCED", "RECORDED_EXTRACTION",
           "RECORDED_EXTRACTION_FENCED"]

# Converse answers as recorded (Nova Micro, temperature 0): the JSON alone, and the JSON fenced.
RECORDED_PLAIN = {
    "output": {"message": {"role": "assistant",
                           "content": [{"text": '{"same_fact": true, "contradiction": false}'}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 168, "outputTokens": 15, "totalTokens": 183},
    "metrics": {"latencyMs": 296},
}
RECORDED_FENCED = {
    "output": {"message": {"role": "assistant",
                           "content": [{"text": '```json\n{"same_fact": false, "contradiction": true}\n```'}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 171, "outputTokens": 21, "totalTokens": 192},
    "metrics": {"latencyMs": 338},
}
# Entity extraction's answers in Converse's response shape (as `RECORDED_PLAIN`), for "Alice works on
# Project Atlas. The memory leak in Atlas was caused by the cache layer (INC-42).": the JSON alone,
# and the same JSON fenced after a sentence, as small models like to answer. Written by hand in
# that shape (not captured from a model); the token counts are estimates.
_EXTRACTION_TEXT = (
    '{"entities": [{"name": "Alice", "type": "PERSON"}, {"name": "Project Atlas", "type": "PROJECT"}, '
    '{"name": "memory leak", "type": "CONCEPT"}, {"name": "cache layer", "type": "SYSTEM"}, '
    '{"name": "INC-42", "type": "TICKET"}], "relations": [{"source": "Alice", "target": "Project Atlas", '
    '"type": "WORKS_ON"}, {"source": "memory leak", "target": "cache layer", "type": "CAUSED_BY"}, '
    '{"source": "memory leak", "target": "Project Atlas", "type": "PART_OF"}, {"source": "INC-42", '
    '"target": "memory leak", "type": "RELATES_TO"}]}')
RECORDED_EXTRACTION = {
    "output": {"message": {"role": "assistant", "content": [{"text": _EXTRACTION_TEXT}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 262, "outputTokens": 131, "totalTokens": 393},
    "metrics": {"latencyMs": 612},
}
RECORDED_EXTRACTION_FENCED = {
    "output": {"message": {"role": "assistant", "content": [
        {"text": "Here is the knowledge graph:\n```json\n" + _EXTRACTION_TEXT + "\n```"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 262, "outputTokens": 142, "totalTokens": 404},
    "metrics": {"latencyMs": 655},
}
_LINE = re.compile(r"^([AB])(?: \(category: (.*)\))?: (.*)$")
_MESSAGE = re.compile(r"^\[(\d+)\] (?:(.+) \()?(user|assistant)\)?: (.*)$")


class ConverseFake:
    def __init__(self, client: Any) -> None:
        self._client = client
        self.requests: list[dict[str, Any]] = []
        self.answer: str = "heuristic"
        self.fail: str | None = None
        self.stop_reason = "end_turn"
        self._uid = f"converse-fake-{id(self)}"
        client.meta.events.register("before-call.bedrock-runtime.Converse", self._on_call, unique_id=self._uid)

    def uninstall(self) -> None:
        self._client.meta.events.unregister("before-call.bedrock-runtime.Converse", unique_id=self._uid)

    def _on_call(self, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        body = json.loads(params["body"])
        self.requests.append(body)
        url = params.get("url", "https://bedrock-runtime.us-east-1.amazonaws.com/")
        if self.fail == "timeout":
            raise ReadTimeoutError(endpoint_url=url)
        if self.fail is not None:
            status = 429 if self.fail == "ThrottlingException" else 400 if "Validation" in self.fail else 403 \
                if self.fail == "AccessDeniedException" else 500
            parsed = {"Error": {"Code": self.fail, "Message": f"injected {self.fail}"},
                      "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}}
            return AWSResponse(url, status, {}, None), parsed
        text = self._heuristic(body) if self.answer == "heuristic" else self.answer
        parsed = {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": self.stop_reason,
            "usage": {"inputTokens": 170, "outputTokens": 15, "totalTokens": 185},
            "metrics": {"latencyMs": 300},
            "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0},
        }
        return AWSResponse(url, 200, {}, None), parsed

    @staticmethod
    def _heuristic(body: dict[str, Any]) -> str:
        return heuristic_answer(body["system"][0]["text"], body["messages"][0]["content"][0]["text"])


def heuristic_answer(system: str, text: str) -> str:
    """What a model that agrees with the local heuristics answers to one of our prompts (also the
    OpenAI-compatible fake's, `tests/fakes/chat_endpoint.py`)."""
    if system == EXTRACTION_PROMPT:
        found = PatternExtractor().extract(text)
        return json.dumps({"entities": [{"name": n, "type": t} for n, t in found.entities],
                           "relations": [{"source": s, "target": d, "type": t} for s, d, t in found.relations]})
    if system == MEMORY_PROMPT:
        return json.dumps({"memories": _patterns_memories(text)})
    lines = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            lines[m.group(1)] = (m.group(3), m.group(2))
    (a, a_cat), (b, b_cat) = lines["A"], lines["B"]
    relation = judge_statements(a, b, existing_category=a_cat, candidate_category=b_cat).relation
    return json.dumps({"same_fact": relation == "same", "contradiction": relation == "contradiction"})


def _patterns_memories(prompt: str) -> list[dict[str, Any]]:
    """What the local patterns find in the conversation's `[seq] speaker: text` lines, as the
    extraction prompt's JSON (the patterns' own statements: no embedder here)."""
    messages = []
    for line in prompt.splitlines():
        m = _MESSAGE.match(line)
        if m:
            messages.append(ConversationMessage(role=m.group(3), content=m.group(4), seq=int(m.group(1)),
                                                name=m.group(2)))
    return [{"content": f.content, "type": f.type, "importance": f.importance, "category": f.category,
             "source": list(f.seqs)} for f in find_memories(messages) if f.pattern != "open"]


def install_converse_fake(client: Any) -> ConverseFake:
    return ConverseFake(client)
