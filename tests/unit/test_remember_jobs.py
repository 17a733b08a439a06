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


def _drain_with_arrivals(queue, clock, after: str, arrivals: list[tuple[str, str]]) -> list[str]:
    """The candidate ids a drain runs, in order, `arrivals` (tenant, candidate id) queued once the
    job `after` has run."""
    ran: list[str] = []

    def run(job: RememberJob) -> None:
        ran.append(job.candidate_id)
        if job.candidate_id == after:
            for tenant, candidate_id in arrivals:
                _enqueue(queue, clock, tenant, candidate_id)

    queue.drain(run)
    return ran


def test_a_job_queued_while_the_drain_runs_takes_the_next_turn(tmp_path, clock):
    queue = _queue(tmp_path, clock)
    for n in range(4):
        _enqueue(queue, clock, "busy", f"b{n}")
    # another tenant's call arrives while the backlog drains
    assert _drain_with_arrivals(queue, clock, "b1", [("quiet", "q0")]) == ["b0", "b1", "q0", "b2", "b3"]


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


def test_a_tenant_that_came_late_takes_turns_not_every_turn_until_it_catches_up(tmp_path, clock):
    """Turns go to the tenant served longest ago, not to the one served least: a tenant whose
    backlog arrives after another's ten jobs ran does not then hold the queue for ten of its own."""
    queue = _queue(tmp_path, clock)
    for n in range(10):
        _enqueue(queue, clock, "early", f"e{n}")
    # a backlog of another tenant, then one more of the first
    ran = _drain_with_arrivals(queue, clock, "e9", [*(("late", f"l{n}") for n in range(30)), ("early", "urgent")])
    assert ran[10:13] == ["l0", "urgent", "l1"]


def test_a_tenants_own_jobs_keep_their_order_whoever_queued_them(tmp_path, clock):
    queue = _queue(tmp_path, clock)
    for n in range(3):  # two users of one tenant, writing to a layer they share: a later one decided later
        _enqueue(queue, clock, "acme", f"alice{n}")
        _enqueue(queue, clock, "acme", f"bob{n}")
    ran: list[str] = []
    queue.drain(lambda job: ran.append(job.candidate_id))
    assert ran == ["alice0", "bob0", "alice1", "bob1", "alice2", "bob2"]
