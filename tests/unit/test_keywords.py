"""The keyword analyzer, BM25, the fusion, and the local keyword index."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading

import pytest

from memsvc.adapters.local.keyword_index import LocalKeywordIndex
from memsvc.core.crypto import term_ids
from memsvc.core.filters import parse_filter
from memsvc.core.keywords import analyze, bm25, idf, query_terms, term_counts
from memsvc.core.models import KeywordDoc
from memsvc.core.ranking import keyword_match


class TestAnalyzer:
    def test_folds_case_and_width_stems_and_drops_stop_words(self):
        assert analyze("The RUNNERS were Running to ｔｈｅ Ｐａｒｋ") == ["runner", "were", "run", "park"]

    def test_keeps_codes_versions_and_dates_whole_as_well_as_their_parts(self):
        terms = analyze("INC-20931 broke 3.12.1 on 2026-03-14")
        assert {"inc-20931", "3.12.1", "2026-03-14", "inc", "20931", "2026"} <= set(terms)

    def test_skips_overlong_runs(self):
        assert analyze("a" * 65 + " walrus") == ["walrus"]

    def test_compounds_are_chains_of_words_joined_by_one_separator(self):
        # A separator at the end or doubled ends the chain; a chain longer than a term is no term.
        assert analyze("v1.2. end-. x..y a/b:c-d") == ["v1", "2", "end", "x", "y", "b", "c", "d", "v1.2", "a/b:c-d"]
        assert analyze("-".join(["ab"] * 40) + " ok") == ["ab"] * 40 + ["ok"]

    def test_an_underscore_inside_a_word_makes_it_a_compound(self):
        # `_` is a word character; a word holding one between two characters is also kept whole.
        assert analyze("snake_case _private trailing_ a__b") == [
            "snake_cas", "_privat", "trailing_", "a__b", "snake_case", "a__b"]

    def test_a_long_run_of_combining_marks_leaves_the_words_around_it(self):
        # Made stream-safe (UAX #15) before NFKC, whose reordering is quadratic in a run's length.
        assert analyze("e" + "\u0301" * 40 + "\u0316" * 40 + " walrus") == ["é", "walrus"]

    def test_counts_terms_across_texts(self):
        assert term_counts(["walrus tusk", "walruses"]) == {"walrus": 2, "tusk": 1}

    def test_non_latin_words_are_terms(self):
        assert analyze("Müller trinkt grünen Tee") == ["müller", "trinkt", "grünen", "tee"]


class TestBm25:
    def test_matches_the_textbook_formula_without_length_normalisation(self):
        expected = math.log(1 + (10 - 2 + 0.5) / (2 + 0.5)) * 3 * 2.2 / (3 + 1.2)
        assert bm25(3, 2, 10, 8, 10.0) == pytest.approx(expected)
        assert bm25(3, 2, 10, 80, 10.0) == bm25(3, 2, 10, 1, 10.0)  # b = 0: length does not matter

    def test_a_single_occurrence_scores_its_idf(self):
        # So a keyword match is the share of the query's IDF that a memory holds.
        assert bm25(1, 4, 50, 7, 12.0) == pytest.approx(idf(4, 50))

    def test_rarer_terms_weigh_more_and_idf_is_never_negative(self):
        assert idf(1, 100) > idf(50, 100) > idf(100, 100) > 0

    def test_keyword_match_is_a_capped_fraction(self):
        assert keyword_match(2.0, 4.0) == 0.5
        assert keyword_match(9.0, 4.0) == 1.0
        assert keyword_match(1.0, 0.0) == 0.0



class TestQueryTerms:
    def test_drop_function_words_that_the_index_keeps(self):
        assert query_terms("What did Maria start in May?") == ["maria", "start", "may"]
        assert analyze("What did Maria start in May?") == ["what", "did", "maria", "start", "may"]

    def test_keep_codes_and_content_words(self):
        assert query_terms("when was INC-20931 opened") == ["inc", "20931", "open", "inc-20931"]

    def test_a_query_of_function_words_has_no_terms(self):
        assert query_terms("what is it about?") == []


class TestBlindTerms:
    def test_are_stable_per_key_and_differ_across_keys(self):
        a, b = b"a" * 32, b"b" * 32
        assert term_ids(a, ["walrus"]) == term_ids(a, ["walrus"])
        assert term_ids(a, ["walrus"]) != term_ids(b, ["walrus"])
        assert len(term_ids(a, ["walrus"])[0]) == 16 and "walrus" not in term_ids(a, ["walrus"])[0]


def doc(memory_id, terms, ns=("user", "alice"), tenant="t", attrs=None):
    return KeywordDoc(tenant, ns, memory_id, memory_id, 1, attrs or {}, terms, sum(terms.values()))


class TestLocalKeywordIndex:
    def test_ranks_by_bm25_over_the_prefix_only(self, tmp_path):
        index = LocalKeywordIndex(tmp_path / "k.db")
        index.put_many([doc("a", {"x": 2, "y": 1}), doc("b", {"x": 1, "z": 5}),
                        doc("c", {"x": 9}, ns=("user", "bob"))])
        result = index.query("t", ("user", "alice"), parse_filter({}), ["x", "y"], 10)
        assert [h.memory_id for h in result.hits] == ["a", "b"]
        n, avg = 2, 4.5  # bob's document counts in neither the statistics nor the hits
        assert result.hits[0].score == pytest.approx(bm25(2, 2, n, 3, avg) + bm25(1, 1, n, 3, avg), rel=1e-5)
        assert result.query_weight == pytest.approx(idf(2, n) + idf(1, n))

    def test_a_prefix_never_crosses_a_segment_boundary(self, tmp_path):
        index = LocalKeywordIndex(tmp_path / "k.db")
        index.put_many([doc("a", {"x": 1}, ns=("ab",)), doc("b", {"x": 1}, ns=("a", "b"))])
        assert [h.memory_id for h in index.query("t", ("a",), parse_filter({}), ["x"], 10).hits] == ["b"]

    def test_pushdown_filters_hits_and_statistics(self, tmp_path):
        index = LocalKeywordIndex(tmp_path / "k.db")
        index.put_many([doc("a", {"x": 1}, attrs={"team": "red"}), doc("b", {"x": 1}, attrs={"team": "blue"})])
        result = index.query("t", (), parse_filter({"team": "red"}), ["x"], 10)
        assert [h.memory_id for h in result.hits] == ["a"] and result.query_weight == pytest.approx(idf(1, 1))

    def test_survives_a_restart_and_rebuilds_after_many_deletes(self, tmp_path):
        index = LocalKeywordIndex(tmp_path / "k.db")
        index.put_many([doc(f"m{i}", {"x": 1, f"only{i}": 1}) for i in range(3000)])
        index.delete_many("t", [f"m{i}" for i in range(2990)])
        assert index.memory_ids("t") == {f"m{i}" for i in range(2990, 3000)}
        reopened = LocalKeywordIndex(tmp_path / "k.db")
        result = reopened.query("t", (), parse_filter({}), ["x"], 100)
        assert sorted(h.memory_id for h in result.hits) == sorted(index.memory_ids("t"))

    def test_put_is_idempotent_and_tenants_are_apart(self, tmp_path):
        index = LocalKeywordIndex(tmp_path / "k.db")
        index.put_many([doc("a", {"x": 1}), doc("a", {"x": 1})])
        index.put_many([doc("a", {"x": 1})])
        assert index.memory_ids("t") == {"a"}
        assert index.query("other", (), parse_filter({}), ["x"], 10).hits == []
        assert index.delete_tenant("t") == 1 and index.memory_ids("t") == set()


_WORDS = ("running runners ran easily generously connections connected happiness relational conditional "
          "hopefully agreed feed skies dying lying news proceed exceeding cannings inning outing andes "
          "atlas cosmos bias gently singly ugly early only sky").split()


def test_the_english_stemmer_alone_stems_as_the_snowballstemmer_package_does():
    import snowballstemmer

    package = snowballstemmer.stemmer("english")
    assert [analyze(w) for w in _WORDS] == [[package.stemWord(w)] for w in _WORDS]


def test_the_analyzer_imports_no_stemmer_until_it_stems_and_then_the_english_one_alone():
    """snowballstemmer's package imports 30 languages' stemmers: a Lambda cold start's cost."""
    script = ("import json, sys\nfrom memsvc.core.keywords import analyze\n"
              "before = sorted(m for m in sys.modules if 'stemmer' in m)\n"
              "assert analyze('running') == ['run']\n"
              "print(json.dumps([before, sorted(m for m in sys.modules if 'stemmer' in m)]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    before, after = json.loads(done.stdout)
    assert before == []
    assert after == ["_memsvc_snowballstemmer_english", "_memsvc_snowballstemmer_english.among",
                     "_memsvc_snowballstemmer_english.basestemmer", "_memsvc_snowballstemmer_english.english_stemmer"]


def test_each_thread_stems_with_a_stemmer_of_its_own():
    """A stemmer holds the word it works on: one shared by threads mixed two words' letters (an
    IndexError, a 500 on a write while the indexer stemmed)."""
    from concurrent.futures import ThreadPoolExecutor

    from memsvc.core import keywords

    with ThreadPoolExecutor(max_workers=2) as pool:
        barrier = threading.Barrier(2)

        def stemmer_of_this_thread():
            barrier.wait()  # both threads alive at once: two threads, not one reused
            return keywords._english_stemmer()

        first, second = pool.map(lambda _: stemmer_of_this_thread(), range(2))
    assert first is not second and keywords._english_stemmer() is keywords._english_stemmer()
