"""The suite is there: `make test` unpacks LangGraph's tests before running pytest."""

from tests.langgraph_suite.conftest import UPSTREAM


def test_langgraphs_store_tests_are_unpacked():
    present = sorted(p.name for p in UPSTREAM.glob("test_*.py"))
    assert present == ["test_async_store.py", "test_store.py", "test_ttl.py"], "run `make langgraph-suite`"
