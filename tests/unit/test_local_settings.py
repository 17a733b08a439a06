"""How many request threads each `memsvc serve` process runs: one per core across its processes."""

from pathlib import Path

import pytest

from memsvc import settings as settings_module
from memsvc.settings import LocalSettings


@pytest.mark.parametrize(("cores", "workers", "threads"), [
    (2, 1, 2), (1, 1, 2), (8, 1, 8),  # a lone process keeps a second thread for a slow request
    (2, 2, 1), (8, 2, 4), (2, 4, 1),
])
def test_one_request_thread_per_core_across_the_processes(monkeypatch, cores, workers, threads):
    monkeypatch.setattr(settings_module.os, "cpu_count", lambda: cores)
    assert LocalSettings(Path("d"), workers=workers).request_threads() == threads


def test_worker_processes_read_back_the_worker_count(monkeypatch, tmp_path):
    for name in ("MEMSVC_WORKERS", "MEMSVC_DATA_DIR"):  # so that what export writes is undone
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    assert LocalSettings.from_env().workers == 1
    LocalSettings(tmp_path, workers=3).export()
    assert LocalSettings.from_env().workers == 3


def test_the_rerank_api_is_one_of_the_shapes_and_a_typo_stops_the_start(monkeypatch):
    monkeypatch.setenv("MEMSVC_RERANK_API", "tei")
    assert LocalSettings.from_env().rerank_api == "tei"
    monkeypatch.setenv("MEMSVC_RERANK_API", "cohre")
    with pytest.raises(ValueError, match="MEMSVC_RERANK_API"):
        LocalSettings.from_env()


def test_the_console_sign_in_helper_is_on_unless_turned_off_and_workers_read_the_choice(monkeypatch, tmp_path):
    for name in ("MEMSVC_CONSOLE_SIGN_IN", "MEMSVC_WORKERS", "MEMSVC_DATA_DIR"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    assert LocalSettings.from_env().console_sign_in is True
    monkeypatch.setenv("MEMSVC_CONSOLE_SIGN_IN", "of")
    with pytest.raises(ValueError, match="MEMSVC_CONSOLE_SIGN_IN"):
        LocalSettings.from_env()
    monkeypatch.delenv("MEMSVC_CONSOLE_SIGN_IN")
    LocalSettings(tmp_path, workers=2, console_sign_in=False).export()
    assert LocalSettings.from_env().console_sign_in is False
