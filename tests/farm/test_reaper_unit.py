"""The reaper's decisions against a scripted coordinator (no processes): grace per holder,
where a holder is a user and a reservation, since CI jobs often run as one user."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

pytest.importorskip("labgrid", reason="the farm tests need the 'farm' extra (make install)")

from npuemu.farm import reaper as reaper_module
from npuemu.farm.reaper import Reaper
from xrt.errors import ErrorCode, XrtError
from xrt.farm import FarmDevice

USER = "ci-host/ci"


@dataclass
class FakePlace:
    name: str
    acquired: str | None = None
    reservation: str | None = None
    matches: list = field(default_factory=list)


@dataclass
class FakeClient:
    """What the reaper asks of `xrt.farm.FarmClient`, with one place and one device."""

    place: FakePlace
    leased: bool = False
    released: list[str] = field(default_factory=list)
    fail_release: bool = False

    def snapshot_places(self) -> list[FakePlace]:
        return [self.place]

    def place_devices(self, place: FakePlace) -> list[FarmDevice]:
        path = ("host1", "default", "NpuEmuDevice", "npu0")
        return [FarmDevice(path, "127.0.0.1", 1, "npu0", "zg330", True, place.name)]

    def extra(self, device: FarmDevice) -> dict[str, str]:
        return {"state": "leased" if self.leased else "free"}

    def cancel(self, token: str) -> None:
        pass

    def release(self, place: str, *, from_user: str | None = None) -> None:
        self.released.append(place)
        self.place.acquired = self.place.reservation = None  # the coordinator did it
        if self.fail_release:
            raise XrtError(ErrorCode.DEVICE_INTERNAL, "labgrid coordinator: call timed out")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(reaper_module.time, "monotonic", lambda: now[0])
    return now


def _reaper(client: FakeClient) -> Reaper:
    r = Reaper(client, grace_s=6.0)  # type: ignore[arg-type]
    r.quarantine = lambda: None  # type: ignore[method-assign]  # not under test here
    return r


def test_an_unleased_place_is_given_back_after_the_grace(clock: list[float]) -> None:
    client = FakeClient(FakePlace("p", USER, "tokA"))
    r = _reaper(client)
    assert r.step() == []
    clock[0] += 5.9
    assert r.step() == []
    clock[0] += 0.2
    assert r.step() == ["p"]


def test_a_job_taking_the_place_over_between_two_looks_gets_its_own_grace(
    clock: list[float],
) -> None:
    """Job A (user ci) held the place unleased for 5 s; job B, the same user, takes it over
    (A gave it back by itself) and has not opened its device yet: B's grace starts now."""
    client = FakeClient(FakePlace("p", USER, "tokA"))
    r = _reaper(client)
    r.step()
    clock[0] += 5.0
    client.place.reservation = "tokB"  # same user, another job
    assert r.step() == []
    clock[0] += 5.0  # 10 s after A's acquisition, 5 s into B's
    assert r.step() == []
    clock[0] += 1.1
    assert r.step() == ["p"]


def test_a_failed_release_does_not_hand_its_grace_to_the_next_holder(clock: list[float]) -> None:
    """The coordinator released the place although the reply was lost; the next job (same
    user) acquires it: it must not be reaped at once."""
    client = FakeClient(FakePlace("p", USER, "tokA"), fail_release=True)
    r = _reaper(client)
    r.step()
    clock[0] += 7.0
    assert r.step() == []  # the release "failed"
    client.fail_release = False
    client.place.acquired, client.place.reservation = USER, "tokC"
    assert r.step() == []
    clock[0] += 5.0
    assert r.step() == []
    assert client.released == ["p"]
