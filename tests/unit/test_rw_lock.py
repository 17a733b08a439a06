"""The indexes' readers-writer lock: readers share it, a writer has it alone and goes before new readers.

No test waits for time to pass: the timeouts only bound how long a broken lock can hang a test.
"""

from __future__ import annotations

import threading

from memsvc.adapters.local.rw_lock import ReadWriteLock

HANG = 30.0  # seconds a broken lock may hang a test before it fails


def _start(target) -> threading.Thread:
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t


def _until(condition) -> None:
    """Wait until another thread's progress makes `condition` true (it will, unless the lock is broken)."""
    done = threading.Event()
    for _ in range(int(HANG * 1000)):
        if condition():
            return
        done.wait(0.001)
    raise AssertionError("the other thread never got there")


def test_readers_hold_the_lock_together():
    lock, inside = ReadWriteLock(), threading.Barrier(3, timeout=HANG)

    def reader() -> None:
        with lock.reading():
            inside.wait()  # breaks (and fails the test) unless all three are inside at once

    threads = [_start(reader) for _ in range(2)]
    with lock.reading():
        inside.wait()
    for t in threads:
        t.join(HANG)
    assert not inside.broken


def test_a_writer_waits_for_the_readers_and_new_readers_wait_for_it():
    lock, order = ReadWriteLock(), []
    reader_in, release_reader = threading.Event(), threading.Event()

    def first_reader() -> None:
        with lock.reading():
            reader_in.set()
            release_reader.wait(HANG)
            order.append("first reader out")

    def writer() -> None:
        with lock.writing():
            order.append("writer")

    def late_reader() -> None:
        with lock.reading():
            order.append("late reader")

    threads = [_start(first_reader)]
    assert reader_in.wait(HANG)
    threads.append(_start(writer))
    _until(lambda: lock._writers_waiting == 1)  # the writer is queued behind the reader
    threads.append(_start(late_reader))
    release_reader.set()
    for t in threads:
        t.join(HANG)
    assert order == ["first reader out", "writer", "late reader"]


def test_writers_take_turns():
    lock, inside, overlaps = ReadWriteLock(), [0], []

    def writer() -> None:
        for _ in range(200):
            with lock.writing():
                inside[0] += 1
                overlaps.append(inside[0])
                inside[0] -= 1

    threads = [_start(writer) for _ in range(4)]
    for t in threads:
        t.join(HANG)
    assert overlaps == [1] * 800
