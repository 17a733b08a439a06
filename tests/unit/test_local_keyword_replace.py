"""`LocalKeywordIndex.replace_many`: a document replaced in place (a message whose turn before
changed) answers with its new terms and statistics, in this process, in another one catching up
on the same file, and after a restart; a replacement and a delete of one version apply one after
the other, whole."""

from __future__ import annotations

import pytest

from memsvc.adapters.local.keyword_index import LocalKeywordIndex
from memsvc.core.filters import Filter
from memsvc.core.models import FieldDoc, KeywordDoc

ALL = Filter(())


def doc(memory_id: str, terms: dict[str, int]) -> KeywordDoc:
    return KeywordDoc("t", ("user", "alice"), memory_id, memory_id, 1, {}, terms, sum(terms.values()))


def hits(index: LocalKeywordIndex, *terms: str) -> dict[str, float]:
    return {h.memory_id: h.score for h in index.query("t", (), ALL, list(terms), 100).hits}


OLD = doc("m1", {"pictures": 1, "flamingos": 2, "lagoon": 1})
NEW = doc("m1", {"pictures": 1, "herons": 1, "pier": 3})
OTHERS = [doc("m2", {"pictures": 2, "pier": 1}), doc("m3", {"lagoon": 1, "boat": 1})]


def test_a_replaced_document_answers_as_a_fresh_index_holding_it_would(tmp_path):
    index = LocalKeywordIndex(tmp_path / "k.db")
    index.put_many([OLD, *OTHERS])
    index.replace_many([NEW])
    fresh = LocalKeywordIndex(tmp_path / "fresh.db")
    fresh.put_many([NEW, *OTHERS])
    for terms in [("pictures",), ("flamingos", "lagoon"), ("herons", "pier"), ("boat", "pier", "pictures")]:
        assert hits(index, *terms) == pytest.approx(hits(fresh, *terms), rel=1e-6), terms
    assert "m1" not in hits(index, "flamingos")
    assert index.memory_ids("t") == {"m1", "m2", "m3"}
    assert hits(LocalKeywordIndex(tmp_path / "k.db"), "herons", "flamingos") == pytest.approx(
        hits(fresh, "herons", "flamingos"), rel=1e-6)  # the file holds the new document


def test_another_process_catches_up_with_a_replacement(tmp_path):
    a, b = LocalKeywordIndex(tmp_path / "k.db"), LocalKeywordIndex(tmp_path / "k.db")
    a.put_many([OLD, *OTHERS])
    assert "m1" in hits(b, "flamingos")
    a.replace_many([NEW])
    assert "m1" not in hits(b, "flamingos")
    assert "m1" in hits(b, "herons")
    assert hits(b, "pictures", "pier") == pytest.approx(hits(a, "pictures", "pier"), rel=1e-6)


def test_a_replacement_of_an_absent_document_puts_it_and_a_delete_after_it_removes_it(tmp_path):
    a, b = LocalKeywordIndex(tmp_path / "k.db"), LocalKeywordIndex(tmp_path / "k.db")
    a.replace_many([NEW], [FieldDoc("t", ("user", "alice"), "m1", frozenset({"tok"}))])
    assert a.memory_ids("t") == b.memory_ids("t") == {"m1"}
    assert "tok" in a.field_holders("t", (), ["tok"]).tokens_held(("user", "alice"), "m1")
    b.delete_many("t", ["m1"])
    assert hits(a, "herons") == {} and hits(b, "herons") == {}
    assert a.memory_ids("t") == set()


def test_many_replacements_of_one_document_leave_one_live_slot(tmp_path):
    index = LocalKeywordIndex(tmp_path / "k.db")
    index.put_many([OLD])
    for n in range(3000):  # past the compaction threshold: the tenant's postings are rebuilt from the rows
        index.replace_many([doc("m1", {"pictures": 1, f"w{n}": 1})])
    assert hits(index, "pictures").keys() == {"m1"}
    assert hits(index, "w2998") == {} and hits(index, "w2999").keys() == {"m1"}
    assert index._tenants["t"].size < 3000


def test_a_tenants_rebuild_holds_up_no_query_and_takes_in_what_changed_while_it_ran(tmp_path, monkeypatch):
    """The compaction of one tenant's postings (`_rebuild_due`) reads the rows and builds the copy
    outside the index's lock: another tenant's query, and this tenant's own, answer while it runs
    (here it is held at its first row until they have), and what is written meanwhile is in the
    copy that takes the old postings' place."""
    import threading

    from memsvc.adapters.local import keyword_index

    index = LocalKeywordIndex(tmp_path / "k.db")
    other = KeywordDoc("other", ("user", "bob"), "o1", "o1", 1, {}, {"zebra": 1}, 1)
    index.put_many([doc(f"m{n}", {"pictures": 1, f"w{n}": 1}) for n in range(2100)] + [other])
    reading, go_on = threading.Event(), threading.Event()
    real_doc = keyword_index._doc

    def held_doc(tenant, *row):
        if threading.current_thread().name == "compaction" and not reading.is_set():
            reading.set()
            go_on.wait()
        return real_doc(tenant, *row)

    monkeypatch.setattr(keyword_index, "_doc", held_doc)
    compaction = threading.Thread(name="compaction", target=index.delete_many,
                                  args=("t", [f"m{n}" for n in range(1100)]))  # past the threshold: a rebuild
    seen: dict[str, object] = {}

    def meanwhile() -> None:
        seen["other"] = hits_of(index, "other", "zebra")  # another tenant's query
        seen["own"] = (hits(index, "w5"), set(hits(index, "w1500")))  # and this tenant's
        index.put_many([doc("late", {"pictures": 1, "heron": 1})])  # written while the copy is built
        index.delete_many("t", ["m2000"])

    compaction.start()
    assert reading.wait(60)  # the rebuild is reading the rows
    others = threading.Thread(target=meanwhile)
    others.start()
    others.join(60)  # a lock held by the rebuild would keep them waiting until it is let go on
    answered_meanwhile = not others.is_alive()
    go_on.set()
    others.join(60)
    compaction.join(60)
    assert answered_meanwhile and not compaction.is_alive()
    assert seen == {"other": {"o1"}, "own": ({}, {"m1500"})}
    rebuilt = index._tenants["t"]
    assert rebuilt.changes_since is None and rebuilt.size < 2100  # the copy took the old postings' place
    assert hits(index, "heron").keys() == {"late"} and hits(index, "w2000") == {}  # with what came meanwhile
    assert len(index.memory_ids("t")) == 2100 - 1100 - 1 + 1
    assert index.memory_ids("t") == LocalKeywordIndex(tmp_path / "k.db").memory_ids("t")  # as the file holds


def hits_of(index: LocalKeywordIndex, tenant: str, *terms: str) -> set[str]:
    return {h.memory_id for h in index.query(tenant, (), ALL, list(terms), 100).hits}
