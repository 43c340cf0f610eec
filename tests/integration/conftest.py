"""Fixtures for runtime -> gRPC -> server -> worker -> RTL tests.

One real ``npu-emu serve`` per target for the whole session (two Buyi devices, one ZG330);
tests open devices on them and close them again (a device has one lease at a time, and a
close resets it and clears its memory for the next test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.npu_device import NpuDevice


@contextmanager
def serving(**kwargs: object) -> Iterator[ServerProcess]:
    """A server for the block, stopped afterwards (its log file goes with it)."""
    srv = ServerProcess.start(**kwargs)  # type: ignore[arg-type]
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def serve() -> Callable[..., AbstractContextManager[ServerProcess]]:
    """``with serve(target=..., devices=..., token=...) as srv:`` for tests that need a
    server of their own."""
    return serving


@pytest.fixture(scope="session")
def buyi_server() -> Iterator[ServerProcess]:
    """Two Buyi devices (npu0, npu1)."""
    with serving(target="buyi", devices=2) as srv:
        yield srv


@pytest.fixture(scope="session")
def zg330_server() -> Iterator[ServerProcess]:
    """One ZG330 device (npu0)."""
    with serving(target="zg330", devices=1) as srv:
        yield srv


@pytest.fixture(scope="session")
def buyi_url(buyi_server: ServerProcess) -> str:
    return buyi_server.url


@pytest.fixture
def open_buyi(buyi_url: str) -> Iterator[Callable[..., NpuDevice]]:
    """``open_buyi(query="", device="")`` opens a Buyi device; all are closed afterwards."""
    opened: list[Device] = []

    def open_(query: str = "", device: str = "") -> NpuDevice:
        url = buyi_url + (f"/{device}" if device else "") + (f"?{query}" if query else "")
        dev = Device.open(url)
        assert isinstance(dev, NpuDevice)
        opened.append(dev)
        return dev

    yield open_
    for dev in opened:
        dev.close()


@pytest.fixture
def buyi(open_buyi: Callable[..., NpuDevice]) -> NpuDevice:
    """A Buyi device with the local fast path (the default on one machine)."""
    return open_buyi()
