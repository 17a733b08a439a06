"""The AWS fixtures: the whole AWS backend on moto and the in-repo fakes (`tests.fakes.aws_stack`),
with the hash embedder (`stack`) or the real TitanEmbedder on the Titan fake (`titan_stack`).

Backoff waits are recorded in `stack.sleeps`, never slept. A module that needs its clock to
start elsewhere overrides `stack_clock`."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tests.conftest import ManualClock
from tests.fakes.aws_stack import aws_stack
from tests.fakes.embedder import HashEmbedder

START = datetime(2025, 6, 10, 9, 15, tzinfo=timezone.utc)  # the stream samples' day


@pytest.fixture
def stack_clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def stack(stack_clock):
    embedder = HashEmbedder()
    with aws_stack(dimension=embedder.dimension, embedder=embedder, clock=stack_clock) as s:
        s.embedder = embedder
        s.clock = stack_clock
        s.sleeps = []
        s.publisher.sleep = s.sleeps.append  # EventBridgePublisher's backoff, without waiting
        yield s


@pytest.fixture
def titan_stack(stack_clock):
    """The real TitanEmbedder (on the Titan fake, 256 dims); its jitter is pinned to the ceiling
    so the recorded delays can be checked."""
    with aws_stack(dimension=256, embedder=None, clock=stack_clock) as s:
        s.clock = stack_clock
        s.sleeps = []
        s.app.embedder.sleep = s.sleeps.append
        s.app.embedder.random = lambda: 1.0
        yield s
