"""The local queue of `remember`/`extract` calls with `wait: false` (`SqliteRememberQueue`): tenants
take turns at it, so one tenant's backlog never queues another tenant's job behind it (order only,
never timing)."""

from __future__ import annotations

from memsvc.adapters.local.remember_jobs import SqliteRememberQueue
from memsvc.core.models import RememberJob


def _queue(tmp_path, clock):
    return SqliteRememberQueue(tmp_path / "jobs.db", clock)


def _enqueue(queue, clock, tenant: str, candidate_id: str) -> None:
    clock.advance(0.001)  # each job queued after the one before
    queue.enqueue(RememberJob(tenant, candidate_id, b"x"))


def test_a_tenants_job_waits_for_one_job_of_each_other_tenant_not_for_their_backlog(tmp_path, clock):
    queue = _queue(tmp_path, clock)
    for n in range(5):
        _enqueue(queue, clock, "busy", f"b{n}")
    _enqueue(queue, clock, "quiet", "q0")
    ran: list[str] = []
    assert queue.drain(lambda job: ran.append(job.candidate_id)) == 6
    assert ran == ["b0", "q0", "b1", "b2", "b3", "b4"]  # a tenant's own jobs stay in order
    assert queue.pending("busy") == queue.pending("quiet") == 0


def test_a_job_queued_while_the_drain_runs_takes_the_next_turn(tmp_path, clock):
    queue = _queue(tmp_path, clock)
    for n in range(4):
        _enqueue(queue, clock, "busy", f"b{n}")
    ran: list[str] = []

    def run(job: RememberJob) -> None:
        ran.append(job.candidate_id)
        if job.candidate_id == "b1":  # another tenant's call arrives while the backlog drains
            _enqueue(queue, clock, "quiet", "q0")

    queue.drain(run)
    assert ran == ["b0", "b1", "q0", "b2", "b3"]


def test_a_drain_runs_at_most_its_limit_and_the_next_one_goes_on(tmp_path, clock):
    queue = _queue(tmp_path, clock)
    for tenant in ("a", "b"):
        for n in range(3):
            _enqueue(queue, clock, tenant, f"{tenant}{n}")
    ran: list[str] = []
    assert queue.drain(lambda job: ran.append(job.candidate_id), limit=4) == 4
    assert ran == ["a0", "b0", "a1", "b1"]
    assert queue.drain(lambda job: ran.append(job.candidate_id)) == 2
    assert ran[4:] == ["a2", "b2"]


def test_a_failing_job_waits_out_its_backoff_while_others_run(tmp_path, clock):
    queue = _queue(tmp_path, clock)
    _enqueue(queue, clock, "a", "fails")
    _enqueue(queue, clock, "b", "works")
    ran: list[str] = []

    def run(job: RememberJob) -> None:
        ran.append(job.candidate_id)
        if job.candidate_id == "fails":
            raise RuntimeError("the model is down")

    assert queue.drain(run) == 2 and ran == ["fails", "works"]
    assert queue.pending("a") == 1 and queue.drain(run) == 0  # not due again yet


def test_users_of_a_tenant_take_turns_too(tmp_path, clock):
    queue = _queue(tmp_path, clock)
    for n in range(4):
        clock.advance(0.001)
        queue.enqueue(RememberJob("acme", f"alice{n}", b"x", party="alice"))
    clock.advance(0.001)
    queue.enqueue(RememberJob("acme", "bob0", b"x", party="bob"))
    clock.advance(0.001)
    queue.enqueue(RememberJob("globex", "carol0", b"x", party="carol"))
    ran: list[str] = []
    queue.drain(lambda job: ran.append(job.candidate_id))
    # tenants alternate, and within acme its users do: bob waits for one of alice's jobs, not four
    assert ran == ["alice0", "carol0", "bob0", "alice1", "alice2", "alice3"]


def test_a_queue_file_from_before_parties_opens_and_drains(tmp_path, clock):
    import sqlite3

    conn = sqlite3.connect(tmp_path / "jobs.db")
    conn.executescript("""
        CREATE TABLE remember_jobs (
            tenant TEXT NOT NULL, candidate_id TEXT NOT NULL, sealed BLOB NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0, not_before INTEGER NOT NULL, enqueued_at INTEGER NOT NULL,
            parked TEXT, PRIMARY KEY (tenant, candidate_id)) WITHOUT ROWID;
        INSERT INTO remember_jobs (tenant, candidate_id, sealed, not_before, enqueued_at) VALUES ('t', 'old', x'00', 0, 0);
    """)
    conn.close()
    queue = _queue(tmp_path, clock)
    ran: list[RememberJob] = []
    assert queue.drain(ran.append) == 1 and (ran[0].candidate_id, ran[0].party) == ("old", "")
