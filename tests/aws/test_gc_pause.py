"""The cold start's pause of the garbage collector (`functions.gc_pause`): the collector is as it
was afterwards, whatever happened inside, what the block built is frozen, and a handler's import
leaves the collector running."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from functions.gc_pause import collector_paused

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_no_collection_inside_and_the_collector_runs_again_after(collector_enabled):
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_what_the_block_built_is_frozen_so_no_later_pass_walks_it(collector_enabled):
    frozen = gc.get_freeze_count()
    with collector_paused():
        built = [[i] for i in range(1000)]  # lists: always tracked by the collector
    assert gc.get_freeze_count() >= frozen + len(built)


def test_an_error_inside_still_restarts_the_collector(collector_enabled):
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("bootstrap failed")
    assert gc.isenabled()


def test_a_collector_paused_before_stays_paused(collector_enabled):
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_importing_the_api_handler_leaves_the_collector_running():
    script = "import gc, functions.api\nprint(gc.isenabled())"
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "True"
