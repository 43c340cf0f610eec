"""The device life cycle (`npuemu.server.leases.LIFE_CYCLE`): every state has its way out,
FREE is reachable from every state, and a transition the table does not allow fails."""

from __future__ import annotations

import pytest

from npuemu.server.leases import LIFE_CYCLE, check_transition
from xrt.hw.wire import DeviceState


def test_every_state_has_a_way_back_to_free() -> None:
    assert set(LIFE_CYCLE) == set(DeviceState)
    for start in DeviceState:
        seen, todo = {start}, [start]
        while todo:
            for nxt in LIFE_CYCLE[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert DeviceState.FREE in seen, f"{start.name} never gets back to FREE"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (DeviceState.FREE, DeviceState.RESETTING),  # a lease ends only on a leased device
        (DeviceState.LEASED, DeviceState.FREE),  # a lease end always clears first
        (DeviceState.RESETTING, DeviceState.LEASED),  # no holder before the clearing ends
        (DeviceState.STARTING, DeviceState.LEASED),
    ],
)
def test_a_transition_the_table_does_not_allow_fails(old: DeviceState, new: DeviceState) -> None:
    with pytest.raises(RuntimeError, match=f"from {old.name} to {new.name}"):
        check_transition("npu0", old, new)


def test_the_normal_life_of_a_lease_is_allowed() -> None:
    path = [DeviceState.STARTING, DeviceState.FREE, DeviceState.LEASED, DeviceState.RESETTING]
    for old, new in zip(path, [*path[1:], DeviceState.FREE], strict=True):
        check_transition("npu0", old, new)
