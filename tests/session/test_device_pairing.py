"""Which device each backend of a session gets.

Devices pair with backends by position; when a backend refuses its device, the session
takes the one pairing in which every backend accepts its device (the manual's Python lists
``[HostDevice.Default(), Device()]`` for ``[BuyiBackend, HostBackend]``), and refuses with
11010 naming backends and devices when none or several fit. `BoardNpu` is the manual
network's NPU backend (`TinyNpuBackend`) restricted, as a real NPU backend is, to one kind
of device: the in-memory board (``mem://``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tinynpu import TinyNpuBackend, manual_network

from xrt import Device, ErrorCode, HostDevice, XrtError
from xrt.backend import HostBackend
from xrt.session import Session
from xrt.testing.memory_transport import MemoryDevice


class BoardNpu(TinyNpuBackend):
    """TinyNpuBackend on the in-memory board only."""

    def check_device(self, device: Device) -> None:
        if not isinstance(device, MemoryDevice):
            raise XrtError(ErrorCode.WRONG_TYPE, f"BoardNpu runs on a mem:// board, not {device!r}")


@pytest.fixture
def board() -> Iterator[Device]:
    dev = Device.open("mem://")
    yield dev
    dev.close()


def _devices(sess: Session) -> list[Device | None]:
    return [b.device for b in sess.backends]


def test_devices_given_in_another_order_pair_by_what_each_backend_accepts(
    board: Device,
) -> None:
    network = manual_network()
    host = HostDevice.default()
    sess = Session.create([BoardNpu, HostBackend], network.view(1), [host, board])
    assert _devices(sess) == [board, host]
    assert sess.backend_bindings()[3].is_type(BoardNpu)
    npu, cpu = BoardNpu(), HostBackend()
    sess2 = Session.create_by_order(network.view(1), [npu, cpu], [host, board])
    assert (npu.device, cpu.device) == (board, host)
    sess.close()
    sess2.close()


def test_a_positional_pairing_that_fits_is_kept() -> None:
    """Both devices suit both backends: nothing is reordered."""
    first, second = HostDevice(), HostDevice()
    sess = Session.create([TinyNpuBackend, HostBackend], manual_network(), [first, second])
    assert _devices(sess) == [first, second]
    sess.close()


def test_two_fitting_pairings_are_refused_naming_them(board: Device) -> None:
    first, second = HostDevice(), HostDevice()
    with pytest.raises(XrtError) as err:
        Session.create(
            [BoardNpu, HostBackend, HostBackend], manual_network(), [first, second, board]
        )
    assert err.value.code == ErrorCode.WRONG_TYPE
    assert "more than one pairing fits" in err.value.message
    assert "BoardNpu, HostBackend, HostBackend" in err.value.message


def test_no_fitting_pairing_is_refused_naming_backends_devices_and_why() -> None:
    first, second = HostDevice(), HostDevice()
    with pytest.raises(XrtError) as err:
        Session.create([BoardNpu, HostBackend], manual_network(), [first, second])
    message = err.value.message
    assert err.value.code == ErrorCode.WRONG_TYPE and "no pairing fits" in message
    assert "[BoardNpu, HostBackend]" in message and repr(first) in message
    assert "BoardNpu runs on a mem:// board" in message


def test_a_closed_device_is_refused_before_pairing(board: Device) -> None:
    closed = HostDevice()
    closed.close()
    with pytest.raises(XrtError) as err:
        Session.create([BoardNpu, HostBackend], manual_network(), [closed, board])
    assert err.value.code == ErrorCode.WRONG_ORDER and "closed" in err.value.message
