"""`SimTransport`: an `NpuTransport` over a simulation worker of this process (``sim://``).

The regions are the gRPC transport's (`xrt.transport.grpc.regions`), which take their
route from `RegionCalls`: register work goes on the register ring first, and here the ring
is the only route (a ring that is revoked means the worker is gone: `call` then raises
11014 naming the device). ``udma`` is a view of the memory file's mapping, so the CPU's
reads and writes are memcpy. The interrupt wait goes on the ring; a reset over the worker's
pipe (`npuemu.embedded.worker`).
"""

from __future__ import annotations

import math
import time
import weakref
from pathlib import Path
from typing import Any

from npuemu.embedded.worker import EXITED, EmbeddedWorker
from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import TargetConfig
from xrt.hw.debug import DebugReply, DebugRequest
from xrt.hw.port import Reset
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.ring import MAX_CYCLES, MAX_WALL_MS, RingStatus
from xrt.hw.ring_core import RingError, RingRevokedError
from xrt.hw.targets import CLOCK_PERIOD_PS, DMA, HW_VERSION
from xrt.transport import MemoryInfo, NpuInfo, NpuTransport, RegisterBlock
from xrt.transport.grpc.regions import GrpcMemRegion, GrpcRegRegion
from xrt.transport.grpc.register_ring import RegisterRing

__all__ = ["SimTransport"]


def sim_info(name: str, target: TargetConfig) -> NpuInfo:
    """What the transport says of its device: the server's `DeviceInfo`, for a target."""
    return NpuInfo(
        name=name,
        target=target.name,
        register_blocks={
            name: RegisterBlock(name, base, target.reg_block_size)
            for name, base in target.sim_register_blocks
        },
        memories={
            m.name: MemoryInfo(m.name, m.base, m.size, host_visible=m.name == "udma")
            for m in target.memories
        },
        dma_bus_bytes=DMA.bus_bytes,
        clock_period_ps=CLOCK_PERIOD_PS,
        hw_version=".".join(map(str, HW_VERSION)),
    )


class SimTransport(NpuTransport):
    """A simulated NPU private to this process: its worker starts here and stops with the
    transport (`close`), at interpreter exit, or with the process.

    Args:
        name: The device's name (``sim://buyi``).
        target: The target to simulate.
        lockstep: Check every launch of the compute engine against the golden model (the
            ring's requests then pass the worker's Python port: slower).

    Raises:
        XrtError: 11014 when the model cannot be built or the worker does not start.
    """

    def __init__(self, name: str, target: TargetConfig, *, lockstep: bool = False) -> None:
        super().__init__()
        self.info = sim_info(name, target)
        self._cycles: int | None = None
        self._worker = EmbeddedWorker(name, target, lockstep=lockstep)
        # Holds the worker, not the transport: a device nobody closed is stopped when it is
        # collected, or at interpreter exit.
        self._finalizer = weakref.finalize(self, self._worker.stop)
        try:
            self._worker.start()
        except BaseException:
            self._closed = True
            self._finalizer()
            raise
        assert self._worker.memory is not None
        self._udma = self._worker.memory.udma_view

    # -- what it is ------------------------------------------------------------------------

    @property
    def worker_pid(self) -> int | None:
        """The simulation worker's process id."""
        return self._worker.pid

    @property
    def log_path(self) -> Path | None:
        """The simulation worker's log (removed with its folder when the device closes)."""
        process = self._worker.process
        return process.log_path if process is not None else None

    @property
    def cycles(self) -> int | None:
        return self._cycles

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<SimTransport {self.info.name} worker pid {self._worker.pid}{state}>"

    # -- what the regions ask (`xrt.transport.grpc.regions.RegionCalls`) -------------------

    @property
    def lease_id(self) -> str:
        return ""  # no server, no lease

    @property
    def ring(self) -> RegisterRing | None:
        return None if self._closed or self._worker.gone else self._worker.ring

    def drop_ring(self, why: str) -> None:
        """The ring's simulator exited (nothing else revokes it while the device is open):
        the worker is gone."""
        self._worker.gone = self._worker.gone or EXITED

    def note_cycles(self, cycles: int) -> None:
        self._cycles = cycles

    def call(self, method: str, request: Any, what: str, *, timeout: float) -> Any:
        """The server's route, which a ``sim://`` device has not: reached only when the ring
        is gone (the worker died, or the device is closed).

        Raises:
            XrtError: 11012 when the transport is closed, else 11014 naming the device.
        """
        self._check_open()
        raise self._worker.gone_error(what)

    def read_memory(self, addr: int, nbytes: int) -> bytearray:
        self._check_open()
        at = addr - self.info.memory("udma").base
        return bytearray(self._udma[at : at + nbytes])

    def write_memory(self, addr: int, data: memoryview) -> None:
        self._check_open()
        at = addr - self.info.memory("udma").base
        self._udma[at : at + len(data)] = data

    # -- regions ---------------------------------------------------------------------------

    def reg_region(self, name: str, regmap: RegisterBlockInfo | None = None) -> GrpcRegRegion:
        self._check_open()
        block = self.info.block(name)
        return GrpcRegRegion(self, name, block.base, block.size, regmap=regmap)

    def host_region(
        self,
        name: str = "udma",
        *,
        base: int | None = None,
        size: int | None = None,
        min_alignment: int = 64,
    ) -> GrpcMemRegion:
        self._check_open()
        mem, b, n = self._window(name, base, size)
        view = self._udma[b - mem.base : b - mem.base + n]
        return GrpcMemRegion(self, name, b, n, view, min_alignment=min_alignment)

    # -- time, interrupt, reset --------------------------------------------------------------

    def wait_irq(self, timeout_s: float, max_cycles: int | None = None) -> bool:
        """Wait for the interrupt line on the ring (`NpuTransport.wait_irq`); ``timeout_s=0``
        looks once (one simulated cycle)."""
        t = float(timeout_s)
        if not math.isfinite(t) or t < 0:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"timeout_s must be >= 0: {timeout_s!r}")
        if max_cycles is not None and (
            not isinstance(max_cycles, int) or isinstance(max_cycles, bool) or max_cycles < 1
        ):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"max_cycles must be an int >= 1: {max_cycles!r}"
            )
        self._check_open()
        cycles_left = 1 if t == 0 and max_cycles is None else (max_cycles or MAX_CYCLES)
        what = "wait for the interrupt"
        deadline = time.monotonic() + t
        while True:  # one ring request waits MAX_WALL_MS at most: a longer wait is several
            ring = self.ring
            if ring is None:
                raise self._worker.gone_error(what)
            wall_s = min(max(deadline - time.monotonic(), 0.001), MAX_WALL_MS / 1000)
            try:
                waited = ring.wait_irq(cycles_left, wall_s)
            except RingRevokedError:
                self.drop_ring("")
                raise self._worker.gone_error(what) from None
            except RingError as exc:
                code = ErrorCode.OUT_OF_RANGE if exc.status == RingStatus.BAD_REQUEST else None
                raise XrtError(
                    code or ErrorCode.DEVICE_INTERNAL, f"{what} on {self.info.name}: {exc}"
                ) from None
            self._cycles = ring.cycles
            if waited.interrupted:
                return True
            cycles_left -= waited.waited
            if cycles_left <= 0 or time.monotonic() >= deadline - 0.001:
                return False

    # -- the debugger ------------------------------------------------------------------------

    def debug(self, request: DebugRequest) -> DebugReply:
        self._check_open()
        reply = self._worker.debug(request)
        self._cycles = reply.state.cycle or self._cycles
        return reply

    def wait_debug_stop(self, after: int, timeout_s: float) -> bool:
        self._check_open()
        return self._worker.wait_stop(after, timeout_s)

    def reset(self) -> None:
        """Pulse the device's reset (over the worker's pipe); memories keep their contents."""
        self._check_open()
        reply = self._worker.call(Reset(), "reset")
        self._cycles = reply.cycles

    # -- closing ---------------------------------------------------------------------------

    def _close(self) -> None:
        """Stop the worker (it is asked to quit, then killed) and free its memory files."""
        self._finalizer()
