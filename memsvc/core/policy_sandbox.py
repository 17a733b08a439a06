"""Tenants' policy bundles are compiled and evaluated in worker processes, each call with a deadline.

Some of regorus's work is unbounded in one step the instruction budget cannot see: parsing nested
arrays takes twice as long with each level (`[[[...]]]` 25 deep never finishes), and one builtin
call can run for minutes or allocate gigabytes (`units.parse("1e9999999")`,
`bits.lsh(1, 1e8)`, `net.cidr_expand("0.0.0.0/0")`). In the server's own process that would
hold the GIL, and every tenant's requests with it. In a worker, the server's thread only waits on a
pipe: past the deadline the worker is killed, and the caller gets a `400`; a worker that runs out
of memory or stack dies alone. The built-in bundle, which we wrote, stays in-process.

A deadline is counted in the worker's own CPU time (`_Budget`), what the policy costs, so that a
machine busy with other work does not turn a tenant's cheap policy into its `400`. A worker the
machine leaves less than `STARVED_SHARE` of a core for so long, having used less than half its
budget, was starved: "starved", retryable.

A worker serves one call at a time: a line of JSON in, a line of JSON out (before it, `building`
and `built` when the worker first builds the bundle's engines: `_Worker.call`). The pool starts
workers when calls need them, at most `MAX_WORKERS` at once (more callers wait for one), and keeps
them for the next call with the engines they have compiled. Run as a program (`_START`), this
module is the worker.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from memsvc.core import slots
from memsvc.core.errors import InvalidArgument

COMPILE_DEADLINE_S = 10.0  # policy.MAX_BUNDLE_BYTES of plain rules compile in 1 to 4 s
RUN_DEADLINE_S = 2.0  # an evaluation within the instruction budget takes milliseconds
# Of a core: a worker given less while its deadline runs was starved, not slow. A machine that
# busy (a tenth: about 20 runnable threads a core) holds a worker up to 10 times its deadline.
STARVED_SHARE = 0.1
MAX_WORKERS = 8
_START_DEADLINE_S = 60.0  # a cold start on a loaded machine: Python and regorus load in about 0.1 s
_MEMORY_HEADROOM = 1 << 30  # bytes of address space a worker may take beyond what it starts with
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# A worker's command: `python -c _START <server pid> <the server's sys.path>...`.
_START = ("import runpy, sys; sys.path[:0] = sys.argv[2:]; "
          "runpy.run_module('memsvc.core.policy_sandbox', run_name='__main__')")
_EXIT_WAIT_S = 5.0  # for a worker whose output has ended to be reaped
_STOPPING_SIGNALS = frozenset({signal.SIGTERM, signal.SIGHUP})  # a worker ignores SIGINT
_SOURCES_KEPT = 16  # bundles a worker keeps the sources of, to rebuild engines without asking


# What a retry may fix: the policy did nothing wrong (`policy._interrupted`).
NOT_THE_POLICYS_FAULT = frozenset({"stopped", "starved"})


class WorkerFailed(Exception):
    """A worker died ("died"), was stopped by the server or asked to stop ("stopped",
    `_Worker._how_it_ended`), used up its deadline ("deadline") or was starved of CPU meanwhile
    ("starved", `_Budget`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Worker:
    def __init__(self) -> None:
        # The child finds memsvc where this process did (on Lambda it lives in a layer that only
        # the runtime's bootstrap puts on sys.path) and learns which process is its server.
        # stderr is dropped: a Rust panic's text may quote what it failed on (a memory's value).
        self._process = subprocess.Popen(
            [sys.executable, "-c", _START, str(os.getpid()), *(path for path in sys.path if path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        self._buffer = b""
        self._ended = False  # by this server (`end`)
        try:
            ready = self._read_line(_Budget(None, _START_DEADLINE_S))
        except WorkerFailed as failed:
            self.kill()
            raise RuntimeError(f"a policy worker did not start ({failed.reason})") from None
        if ready != b"ready":
            self.kill()
            raise RuntimeError("a policy worker started with an unexpected greeting")

    def call(self, request: dict[str, Any], deadline_s: float) -> dict[str, Any]:
        """The worker's answer to `request`; WorkerFailed, the worker killed, past `deadline_s`
        seconds of its CPU time (`_Budget`). A worker that must first build the bundle's engines
        (they compiled within COMPILE_DEADLINE_S, and building them again costs as much) says so,
        and gets that long to build them; the evaluation then gets `deadline_s`."""
        try:
            self._process.stdin.write(json.dumps(request).encode() + b"\n")
            self._process.stdin.flush()
        except OSError:
            raise WorkerFailed("gone") from None  # it died before this call, having run nothing of it
        budget = _Budget(self._process.pid, deadline_s)
        while True:
            answer = json.loads(self._read_line(budget))
            if answer.get("building"):
                budget = _Budget(self._process.pid, COMPILE_DEADLINE_S)
            elif answer.get("built"):
                budget = _Budget(self._process.pid, deadline_s)
            else:
                return answer

    def _read_line(self, budget: "_Budget") -> bytes:
        out = self._process.stdout.fileno()
        chunks = [self._buffer]
        while b"\n" not in chunks[-1]:  # a line at a time: what follows it is kept for the next read
            if not select.select([out], [], [], budget.wait())[0]:
                continue
            chunk = os.read(out, 1 << 16)
            if not chunk:
                raise WorkerFailed(self._how_it_ended())
            chunks.append(chunk)
        line, _, self._buffer = b"".join(chunks).partition(b"\n")
        return line

    def _how_it_ended(self) -> str:
        """Why the worker's output ended. "stopped": this server ended it (`end`, when it closes) or
        someone asked it to stop (`SIGTERM`, `SIGHUP`: an operator, a supervisor), which is no
        fault of the policy, so the request may be sent again. "died": anything else. What it ran
        can do it in: an allocation past its memory limit or a stack overflow aborts it, and in a
        container whose memory is capped below that limit the kernel's OOM killer ends it first
        with a `SIGKILL`, which a retry would only repeat."""
        try:
            code = self._process.wait(_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:  # its output closed, yet it runs on: treat it as the policy's doing
            return "died"
        return "stopped" if self._ended or -code in _STOPPING_SIGNALS else "died"

    def end(self) -> None:
        """Kill the process; a call in progress on another thread sees it "stopped"."""
        self._ended = True
        self._process.kill()
        self._process.wait()

    def kill(self) -> None:
        """End the process and close its pipes (only by the thread that called it, or when idle)."""
        self.end()
        for pipe in (self._process.stdin, self._process.stdout):
            try:
                pipe.close()
            except OSError:  # the buffered request it never read
                pass


class _Budget:
    """How long a worker may take over a call: `seconds` of its CPU time (user and system, all its
    threads), read from /proc, so the time the machine gives other work is not counted. If the
    machine gives it less than `STARVED_SHARE` of a core until `seconds / STARVED_SHARE` have
    passed, it was starved ("starved"): that is the load's doing, not the policy's, unless it
    used half its budget meanwhile. Without a process (`pid` None: a worker's start) or where
    /proc cannot be read, `seconds` of wall-clock time."""

    def __init__(self, pid: int | None, seconds: float) -> None:
        self._pid, self._seconds = pid, seconds
        self._started = time.monotonic()
        self._cpu_at_start = _cpu_seconds(pid) if pid is not None else None

    def wait(self) -> float:
        """Seconds to wait for the worker's output before looking again; WorkerFailed once the
        budget is used up, or the worker starved."""
        elapsed = time.monotonic() - self._started
        if self._cpu_at_start is None:
            if elapsed >= self._seconds:
                raise WorkerFailed("deadline")
            return self._seconds - elapsed
        starved_after = self._seconds / STARVED_SHARE
        cpu = _cpu_seconds(self._pid)
        if cpu is None:  # reaped since (`end`): its output has ended, which the next read sees
            if elapsed >= starved_after:
                raise WorkerFailed("starved")
            return 0.05
        used = cpu - self._cpu_at_start
        if used >= self._seconds:
            raise WorkerFailed("deadline")
        if elapsed >= starved_after:
            # Half its budget used, slowly: the policy's cost, whatever the load (a retry would
            # only repeat it); less: the machine's doing.
            raise WorkerFailed("deadline" if used >= self._seconds / 2 else "starved")
        # The worker's one thread uses at most a CPU second a second: the budget cannot run out sooner.
        return max(0.01, min(self._seconds - used, starved_after - elapsed))


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time process `pid` has used (user and system); None without /proc (not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()  # after the command's name, which may hold anything
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime: proc(5)'s fields 14 and 15


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Sandbox:
    """The pool of workers of this process. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._idle: list[_Worker] = []
        self._count = 0  # workers started or starting, idle or serving a call
        self._alive: set[_Worker] = set()  # every worker started and not discarded, idle or not
        self._pid = os.getpid()
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="policy-sandbox-spawner")

    def call(self, request: dict[str, Any], deadline_s: float) -> dict[str, Any]:
        """The answer of a worker given `deadline_s` seconds for `request` (waiting for one to be
        free or to start does not count). The calling request's slot serves others meanwhile."""
        with slots.released():
            return self._call(request, deadline_s)

    def _call(self, request: dict[str, Any], deadline_s: float) -> dict[str, Any]:
        while True:
            worker, fresh = self._take()
            try:
                answer = worker.call(request, deadline_s)
            except WorkerFailed as failed:
                self._discard(worker)
                if failed.reason == "gone" and not fresh:
                    continue  # the request gets a fresh one
                if failed.reason == "gone":  # it died between its start and this call: no policy ran
                    raise WorkerFailed("stopped") from None
                raise
            except BaseException:
                self._discard(worker)
                raise
            self._give_back(worker)
            return answer

    def busy(self) -> int:
        """Workers serving a call now (not counting those starting)."""
        with self._lock:
            return len(self._alive) - len(self._idle)

    def close(self) -> None:
        """Kill every worker: a call in progress fails with WorkerFailed("died")."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._alive.difference_update(idle)
            self._count -= len(idle)
            busy = list(self._alive)
            self._lock.notify_all()
        for worker in idle:
            worker.kill()
        for worker in busy:
            worker.end()  # its caller discards it

    def _take(self) -> tuple[_Worker, bool]:
        """An idle worker, or a new one (True)."""
        with self._lock:
            if self._pid != os.getpid():  # a forked server process: the workers are its parent's
                self._idle, self._count, self._alive, self._pid = [], 0, set(), os.getpid()
                self._spawner = ThreadPoolExecutor(1, thread_name_prefix="policy-sandbox-spawner")
            while not self._idle and self._count >= MAX_WORKERS:
                self._lock.wait()
            if self._idle:
                return self._idle.pop(), False
            self._count += 1
        try:
            worker = self._spawner.submit(_Worker).result()
        except BaseException:
            with self._lock:
                self._count -= 1
                self._lock.notify()
            raise
        with self._lock:
            self._alive.add(worker)
        return worker, True

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)
            self._lock.notify()

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._alive.discard(worker)
            self._count -= 1
            self._lock.notify()
        worker.kill()


SANDBOX = Sandbox()


def compile_in_worker(policies: Mapping[str, str], version: str | None, *, stored: bool) -> dict[str, Any]:
    """`policy.compile_here` in a worker: `{"version", "digest", "sources"}`, or `{"invalid":
    {"message", "details"}, "over_budget": bool}` for the InvalidArgument it raised; WorkerFailed
    past the deadline or if the worker died."""
    return SANDBOX.call({"op": "compile", "policies": dict(policies), "version": version, "stored": stored},
                        COMPILE_DEADLINE_S)


def run_in_worker(digest: str, sources: Mapping[str, str], rule: str, input_json: str) -> dict[str, Any]:
    """One evaluation in a worker: `{"output": json text}`, `{"over_budget": true}` or
    `{"engine_error": regorus's text}`; WorkerFailed past the deadline or if the worker died."""
    request: dict[str, Any] = {"op": "run", "digest": digest, "rule": rule, "input": input_json}
    answer = SANDBOX.call(request, RUN_DEADLINE_S)
    if answer.get("need_sources"):
        answer = SANDBOX.call({**request, "sources": dict(sources)}, RUN_DEADLINE_S)
    return answer


def _serve() -> None:
    # Imported here: the server side of this module must not import the policy module (it imports us).
    from memsvc.core import policy

    known: dict[str, dict[str, str]] = {}  # digest -> sources, least recently used first

    def reply(answer: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        answer: dict[str, Any]
        if request["op"] == "compile":
            try:
                compiled = policy.compile_here(request["policies"], request["version"], stored=request["stored"])
            except InvalidArgument as exc:
                answer = {"invalid": {"message": exc.message, "details": exc.details},
                          "over_budget": isinstance(exc, policy.PolicyBudgetExceeded)}
            else:
                sources = compiled.bundle.policies
                known[compiled.digest] = sources
                answer = {"version": compiled.bundle.version, "digest": compiled.digest, "sources": sources}
        else:
            digest = request["digest"]
            sources = request.get("sources") or known.pop(digest, None)
            if sources is None:
                answer = {"need_sources": True}
            else:
                known[digest] = sources
                if not policy.has_thread_engine(digest):  # the server gives building the compile deadline
                    reply({"building": True})
                    policy.build_thread_engine(digest, sources)
                    reply({"built": True})
                answer = policy.run_here_as_answer(digest, sources, request["rule"], request["input"])
        while len(known) > _SOURCES_KEPT:
            del known[next(iter(known))]
        reply(answer)


def _die_with_parent() -> None:
    # A worker stuck in one builtin call never reads its stdin's end: the kernel ends it with the server
    # (strictly, with the thread that started it: Sandbox's spawner, which lives as long as the server).
    prctl = getattr(ctypes.CDLL(None), "prctl", None)  # Linux's C library; elsewhere no such call
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if str(os.getppid()) != sys.argv[1]:  # the server died before the line above
        os._exit(1)


def _limit_memory() -> None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    except OSError:  # not Linux: the worker runs without a memory limit
        return
    limit = size_kb * 1024 + _MEMORY_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


if __name__ == "__main__":
    from memsvc.core import policy as _warm  # noqa: F401  (imported before the limit counts its size)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server; a worker ends with its stdin
    _die_with_parent()
    _limit_memory()
    _serve()
