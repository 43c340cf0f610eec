"""The device log carries the simulated device's own lines (interrupts, engine and DMA
errors, resets), as AIC100's device log does, not only the server's: seen by the worker
where the model is, delivered by ``FollowDeviceLog`` to `Device.follow_server_log` and
`xrt.aic.Context(collect_device_logs=True)`."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from npuemu.server.launch import ServerProcess
from xrt import ErrorCode, XrtError
from xrt.aic import Context, LogLevel
from xrt.backend.npu._driver import EngineDriver
from xrt.npu_device import DmaMemRegion, NpuDevice

pytestmark = pytest.mark.sim

DEVICE_LINE = re.compile(r"^\[device, cycle (\d+)\] (.*)$")


class Lines:
    """The device's own lines a follower got: (level, cycle, text), in order."""

    def __init__(self) -> None:
        self.got: list[tuple[int, int, str]] = []
        self.cond = threading.Condition()

    def __call__(self, level: int, device: str, message: str) -> None:
        m = DEVICE_LINE.match(message)
        if m is None:  # the server's own lines about the device
            return
        with self.cond:
            self.got.append((level, int(m.group(1)), m.group(2)))
            self.cond.notify_all()

    def wait_for(self, pattern: str, count: int = 1) -> list[tuple[int, int, str]]:
        """The lines matching `pattern`, once there are `count` of them (60 s at most)."""

        def found() -> list[tuple[int, int, str]]:
            return [line for line in self.got if re.search(pattern, line[2])]

        with self.cond:
            assert self.cond.wait_for(lambda: len(found()) >= count, 60), self.got
            return found()


@contextmanager
def following(dev: NpuDevice) -> Iterator[Lines]:
    lines = Lines()
    stop = dev.follow_server_log(lines)
    try:
        yield lines
    finally:
        stop()


def provoke_errors(dev: NpuDevice) -> None:
    """A DMA from where no memory is, then a program of undefined instructions."""
    ghost = DmaMemRegion("nowhere", 0xF000_0000, 1 << 20, dev.dma_engine)
    with pytest.raises(XrtError, match="SRC_RANGE"):
        ghost.read(bytearray(8), ghost.base)
    plddr = dev.get_mem_region("plddr")
    plddr.write(plddr.base, b"\xff" * 64)
    with pytest.raises(XrtError, match="ILLEGAL_INSTRUCTION") as err:
        EngineDriver(dev).launch(plddr.base, 2, {0: plddr.base}, what="junk", timeout_s=60)
    assert err.value.code == ErrorCode.DEVICE_INTERNAL


@pytest.mark.parametrize("ring", ["1", "0"], ids=["register-ring", "grpc-only"])
def test_engine_and_dma_errors_and_interrupts_are_the_devices_lines(
    open_buyi: Callable[..., NpuDevice], ring: str
) -> None:
    dev = open_buyi(query=f"ring={ring}")
    with following(dev) as lines:
        provoke_errors(dev)
        (dma,) = lines.wait_for("DMA error")
        (engine,) = lines.wait_for("compute engine")
    assert dma[0] == logging.ERROR and "SRC_RANGE at 0xf0000000" in dma[2]
    assert engine[0] == logging.ERROR
    assert "ILLEGAL_INSTRUCTION at instruction 0 (fetch unit)" in engine[2]
    irqs = [line for line in lines.got if line[2] == "interrupt raised"]
    assert irqs and all(level == logging.INFO for level, _, _ in irqs)
    # Each line carries the device's cycle: in order, and the DMA failed before the program.
    cycles = [cycle for _, cycle, _ in lines.got]
    assert cycles == sorted(cycles) and dma[1] < engine[1]
    assert any(dma[1] - 100 < c <= dma[1] for _, c, t in irqs), "the DMA's interrupt"


def test_the_reset_at_open_is_in_the_leases_log_and_reset_0_skips_it(
    open_buyi: Callable[..., NpuDevice],
) -> None:
    """A stream opened after the open gets the lease's device lines so far: the manual's
    reset at open is the first; with ``reset=0`` there is none until one is asked for."""
    dev = open_buyi(device="npu1")
    with following(dev) as lines:
        (first,) = lines.wait_for("^reset")
    assert lines.got[0] == first
    dev.close()
    dev = open_buyi(device="npu1", query="reset=0")
    with following(dev) as lines:
        dev.reset()
        resets = lines.wait_for("^reset")
    assert len(resets) == 1 and resets[0][1] == max(c for _, c, _ in lines.got)


def test_the_next_holder_does_not_get_the_last_ones_lines(
    open_buyi: Callable[..., NpuDevice],
) -> None:
    dev = open_buyi(device="npu0")
    with following(dev) as lines:
        provoke_errors(dev)
        lines.wait_for("compute engine")
    dev.close()
    dev = open_buyi(device="npu0")
    with following(dev) as lines:
        dev.reset()  # a line of its own lease, to know the backlog has arrived
        lines.wait_for("^reset", 2)
    assert not [t for _, _, t in lines.got if "error" in t]


def test_a_context_collecting_device_logs_gets_the_devices_lines(
    buyi_server: ServerProcess,
) -> None:
    got: list[tuple[LogLevel, str]] = []
    seen = threading.Condition()

    def on_log(level: LogLevel, message: str) -> None:
        with seen:
            got.append((level, message))
            seen.notify_all()

    with Context([f"{buyi_server.url}/npu1"], log_callback=on_log, collect_device_logs=True) as ctx:
        (dev,) = ctx.devices
        assert isinstance(dev, NpuDevice)
        provoke_errors(dev)
        with seen:
            assert seen.wait_for(lambda: any("compute engine" in m for _, m in got), 60), got
    (level, message) = next((lv, m) for lv, m in got if "compute engine" in m)
    assert level == LogLevel.ERROR
    assert re.match(
        r"device npu1: \[device, cycle \d+\] compute engine: NPU error ILLEGAL", message
    )
    assert any(re.match(r"device npu1: \[device, cycle \d+\] reset", m) for _, m in got)
