"""Keyword-strong questions, LoCoMo style, over the conversations of eval/conversations.json.

That file's questions are paraphrases that avoid their evidence's words, so meaning wins on it.
Here each question is asked again over the same evidence in the evidence's own words: a frame,
the speaker's name and a few content words of the evidence turn(s) ("When did Liam mention
the bouldering gym near office?"). A fusion tuned on the paraphrases alone is checked on these;
they are not a dev set of their own.

  python eval/build_lexical_questions.py [--mode rare|common] --out /tmp/lexical.json

- `rare`: a run of the turn's own words, 2-4 content words, around its rarest word (the one
  the fewest turns of the conversation hold).
- `common`: 1-2 words that 3 or more turns of the conversation hold, so the words alone are
  ambiguous.

One `random.Random(SEED)`: the same file on every run. Its stop list is the service's query stop
list (`memsvc.core.keywords`) and a few chit-chat words. The output
has the format of eval/conversations.json (`memsvc eval --dataset` reads it); `build` returns it
for `benchmarks.retrieval_lab`, which builds the sets in memory.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
from collections import Counter
from pathlib import Path

from memsvc.core.keywords import QUERY_STOP_WORDS

SEED = 20261127
MODES = ("rare", "common")
CONVERSATIONS = Path(__file__).resolve().parent / "conversations.json"

FRAMES = (
    "When did {S} mention the {W}?",
    "What did {S} say about the {W}?",
    "Why did {S} bring up the {W}?",
    "How did {S} feel about the {W}?",
    "What happened with {S}'s {W}?",
    "When did {S} talk about {W}?",
    "What did {S} tell about {W}?",
)
# NLTK's English stop words (what the service's query leaves out), and chit-chat words that say
# nothing of a turn's subject.
STOP_WORDS = QUERY_STOP_WORDS | frozenset(
    "said got get really also still one two like finally last new going go went little first next week weeks "
    "back started".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_CLAUSE_END = re.compile(r"[,.;!?]")
_FIRST_PERSON = frozenset({"i", "me", "my", "we", "our", "us", "it"})  # "I'm", "it's" cut to "i", "it"


def _key(word: str) -> str:
    """A word as the rarity count sees it: lower case, cut at an apostrophe (`Maria's` -> `maria`)."""
    return word.lower().split("'")[0]


def content_words(text: str, names: frozenset[str]) -> list[str]:
    """The turn's words that carry its subject, as keys, each once, in the turn's order."""
    out: list[str] = []
    for word in _WORD.findall(text):
        key = _key(word)
        if len(key) >= 3 and key not in STOP_WORDS and key not in names and key not in out:
            out.append(key)
    return out


def rare_run(text: str, words: list[str], n: int, turns_with: Counter[str], rng: random.Random,
             names: frozenset[str]) -> str:
    """The shortest run of the turn's own words, within one clause, around its rarest content word,
    that holds `n` content words and starts and ends with one (names and "I", "my" left out)."""
    anchor = min(words, key=lambda w: (turns_with[w], rng.random()))
    clause = next((c for c in _CLAUSE_END.split(text) if anchor in map(_key, _TOKEN.findall(c))), text)
    tokens = [t for t in _TOKEN.findall(clause) if _key(t) not in names | _FIRST_PERSON]
    keys = [_key(t) for t in tokens]
    if anchor not in keys:
        return anchor
    at = keys.index(anchor)
    content = [k in words for k in keys]
    n = min(n, sum(content))
    runs = [(j - i, rng.random(), i, j) for i in range(at + 1) for j in range(at, len(tokens))
            if content[i] and content[j] and sum(content[i:j + 1]) == n]
    if not runs:
        return anchor
    _, _, i, j = min(runs)
    return " ".join(tokens[i:j + 1])


def common_words(words: list[str], n: int, turns_with: Counter[str], rng: random.Random) -> str:
    """`n` of the turn's content words that 3 or more turns hold (else its commonest word)."""
    pool = [w for w in words if turns_with[w] >= 3] or [max(words, key=lambda w: turns_with[w])]
    return " ".join(sorted(rng.sample(pool, min(n, len(pool))), key=words.index))


def build(doc: dict, mode: str = "rare") -> dict:
    """`doc` (eval/conversations.json's format) with each question asked again in its evidence's words."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    rng = random.Random(SEED)
    names = frozenset(n.lower() for c in doc["conversations"] for n in c["speakers"])
    turns, turns_with = {}, {}
    for conversation in doc["conversations"]:
        counts: Counter[str] = Counter()
        for session in conversation["sessions"]:
            for turn in session["turns"]:
                turns[turn["id"]] = turn
                counts.update(content_words(turn["text"], names))
        turns_with[conversation["id"]] = counts
    questions = []
    for question in doc["questions"]:
        evidence = [turns[e] for e in question["evidence"]]
        counts = turns_with[question["conversation"]]
        phrases = []
        for turn in evidence:
            words = content_words(turn["text"], names)
            if mode == "rare":
                n = rng.choice([2, 3, 4]) if len(evidence) == 1 else rng.choice([1, 2])
                phrases.append(rare_run(turn["text"], words, n, counts, rng, names))
            else:
                n = rng.choice([1, 2]) if len(evidence) == 1 else 1
                phrases.append(common_words(words, n, counts, rng))
        query = rng.choice(FRAMES).format(S=evidence[0]["speaker"], W=" and the ".join(phrases))
        questions.append({**question, "query": query})
    out = copy.deepcopy(doc)
    out["description"] = (
        f"Keyword-strong LoCoMo-style questions ({mode} words of the evidence, seed {SEED}) over the "
        "conversations of eval/conversations.json; built by eval/build_lexical_questions.py. "
        "A robustness check of the fusion, not a dev set.")
    out["questions"] = questions
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, default="rare")
    parser.add_argument("--conversations", type=Path, default=CONVERSATIONS)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    doc = build(json.loads(args.conversations.read_text()), args.mode)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
