"""What conversation-aware indexing of session messages costs and buys (issue 23), on
eval/conversations.json.

Each turn of each conversation is indexed in one of several ways: its content alone, with its
speaker, with its date, one text holding the turn before too, or the texts the indexer makes
(`indexed`: `memsvc.core.message_context.turn_texts`). A turn with several texts ranks by its best
one, and their terms together are its keyword document (`keyword, own text`: its first text's
terms alone, to see what the turn before's terms cost). Each question is ranked against its own
conversation's turns, as a search over the user's `["user", U, "sessions"]` sees them, by our BM25
analyzer (`memsvc.core.keywords`) and by cosine under the local MiniLM model. Prints R@5 per way
and mode.

    .venv/bin/python -m benchmarks.message_context [--split dev|test|all] [--dataset PATH]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import date, datetime, timezone
from pathlib import Path

from memsvc.adapters.local.embedder import MiniLMEmbedder
from memsvc.core.keywords import analyze, bm25
from memsvc.core.message_context import Turn, spoken_on, turn_texts

DATASET = Path(__file__).resolve().parents[1] / "eval" / "conversations.json"
K = 5


def texts_of(conversation: dict) -> dict[str, dict[str, list[str]]]:
    """Per variant: turn id -> the texts indexed for it (each embedded: a turn's best one ranks it;
    their terms together are its keyword document). `indexed` is what the indexer does; the others
    are what it might do instead."""
    variants: dict[str, dict[str, list[str]]] = {"content": {}, "speaker": {}, "date+speaker": {}, "one text": {},
                                                 "prev named": {}, "indexed": {}}
    for session in conversation["sessions"]:
        at = datetime.combine(date.fromisoformat(session["date"]), datetime.min.time(), timezone.utc)
        previous = None
        for t in session["turns"]:
            turn = Turn(t["speaker"], t["text"])
            said = f"{t['speaker']} said: {t['text']}"
            dated = f"{spoken_on(at)}. {said}"
            variants["content"][t["id"]] = [t["text"]]
            variants["speaker"][t["id"]] = [said]
            variants["date+speaker"][t["id"]] = [dated]
            if previous is None:
                variants["one text"][t["id"]] = variants["prev named"][t["id"]] = [dated]
            else:
                replying = f'Replying to {previous.speaker}: "{previous.content[:300]}" {said}'
                variants["one text"][t["id"]] = [f"{spoken_on(at)}. {replying}"]
                variants["prev named"][t["id"]] = [dated, f"{spoken_on(at)}. {replying}"]
            variants["indexed"][t["id"]] = [text for _, text in turn_texts(turn, at, previous)]
            previous = turn
    return variants


class Bm25:
    def __init__(self, docs: dict[str, list[str]]) -> None:
        self.analyzed = {d: Counter(term for text in texts for term in analyze(text)) for d, texts in docs.items()}
        self.lengths = {d: sum(c.values()) for d, c in self.analyzed.items()}
        self.avg = sum(self.lengths.values()) / len(self.lengths)
        self.df: Counter = Counter(term for c in self.analyzed.values() for term in c)

    def rank(self, query: str) -> list[str]:
        terms, n = set(analyze(query)), len(self.analyzed)
        scores = {d: sum(bm25(c[t], self.df[t], n, self.lengths[d], self.avg) for t in terms if c[t])
                  for d, c in self.analyzed.items()}
        return sorted((d for d in scores if scores[d] > 0), key=lambda d: -scores[d])


def recall_at_k(ranked: list[str], evidence: list[str]) -> float:
    return len(set(ranked[:K]) & set(evidence)) / len(evidence)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", default="all", choices=["dev", "test", "all"])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    args = parser.parse_args()
    data = json.loads(args.dataset.read_text())
    conversations = {c["id"]: c for c in data["conversations"] if args.split in ("all", c["split"])}
    questions = [q for q in data["questions"] if q["conversation"] in conversations]
    embedder = MiniLMEmbedder()
    scores: dict[tuple[str, str], list[float]] = {}
    for cid, conversation in conversations.items():
        asked = [q for q in questions if q["conversation"] == cid]
        query_vectors = embedder.embed_array([q["query"] for q in asked])
        for variant, docs in texts_of(conversation).items():
            ids = [i for i, texts in docs.items() for _ in texts]
            vectors = embedder.embed_array([text for texts in docs.values() for text in texts])
            keywords = Bm25(docs)
            own = Bm25({i: texts[:1] for i, texts in docs.items()})  # the turn before left out
            for q, qv in zip(asked, query_vectors):
                best: dict[str, float] = {}
                for n, cosine in enumerate(vectors @ qv):
                    best[ids[n]] = max(best.get(ids[n], -1.0), float(cosine))
                by_cosine = sorted(best, key=lambda i: -best[i])
                scores.setdefault((variant, "semantic"), []).append(recall_at_k(by_cosine, q["evidence"]))
                scores.setdefault((variant, "keyword"), []).append(recall_at_k(keywords.rank(q["query"]),
                                                                                 q["evidence"]))
                scores.setdefault((variant, "keyword, own text"), []).append(
                    recall_at_k(own.rank(q["query"]), q["evidence"]))
    print(f"{len(questions)} questions over {len(conversations)} conversations ({args.split}); R@{K}")
    for (variant, mode), values in sorted(scores.items()):
        print(f"{variant:13s} {mode:17s} {sum(values) / len(values):.3f}")


if __name__ == "__main__":
    main()
