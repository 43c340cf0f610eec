"""Fixtures of the farm tests: a real labgrid farm on loopback (coordinator, two hosts of
one `npu-emu serve` and one exporter each, a reaper) and real job subprocesses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("labgrid", reason="the farm tests need the 'farm' extra (make install)")

from npuemu.farm.launch import FarmJob as Job
from npuemu.farm.launch import FarmProcess, LoopbackFarm
from xrt.farm import FarmClient

GRACE_S = 6.0  # the reaper's grace here: well above a job's acquire-to-open on a busy machine


@pytest.fixture(scope="module")
def farm() -> Iterator[LoopbackFarm]:
    with LoopbackFarm.start(hosts=2, target="zg330", grace_s=None) as f:
        yield f


@pytest.fixture
def jobs(farm: LoopbackFarm) -> Iterator[list[Job]]:
    """Start jobs with ``jobs.append(Job(farm))``; all are killed (by PID) at the end."""
    started: list[Job] = []
    yield started
    for job in started:
        job.stop()
    with FarmClient(farm.coordinator) as client:  # give back what killed jobs left
        for res in client.reservations():
            client.cancel(res.token)
        for name, place in list(client.places.items()):
            if place.acquired:
                client.release(name)


@pytest.fixture
def reaper(farm: LoopbackFarm) -> Iterator[FarmProcess]:
    """The reaper with a short grace, for the tests that kill jobs. Not running in the
    other tests: a grace that short would also reap a slow job between acquire and open."""
    farm.start_reaper(GRACE_S)
    assert farm.reaper is not None
    yield farm.reaper
    farm.reaper.stop()
    farm.reaper = None
