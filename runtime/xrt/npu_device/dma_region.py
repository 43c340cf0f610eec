"""Memories only the DMA engine reaches (``plddr``, ``ocm``), as a driver on the board runs
them: `DmaEngine` programs the DMA through the ``dma`` register region and waits for its
interrupt; `DmaMemRegion` is a `MemRegion` whose bytes move with it.

A transfer runs the programming sequence of `xrt.hw.dma` (docs/hardware.md, "Programming
sequence"), per piece: the programming batch, a wait for the interrupt (the transport: a
WaitInterrupt RPC, UIO, or polling), the readout batch. ``STATUS.ERR_CODE != 0`` raises
XrtError 11014 naming the code and the address.

Writes from the host stage through a *bounce buffer* in ``udma`` (the CPU cannot reach the
destination): host -> bounce (a copy into the mapping, or a WriteMemory stream), then the
DMA moves bounce -> destination. Reads run the other way. Transfers larger than the bounce
buffer go in pieces; with `DmaEngine.double_buffer` (the default) the buffer is two halves
and the host copy of one piece overlaps the DMA of the other. Copies between memories the
DMA reaches (``plddr`` <-> ``udma``, ``plddr`` -> ``plddr``, ``ocm``...) are one DMA each,
without staging; overlapping copies inside one memory (which the engine does not support)
go through the bounce buffer.

Over gRPC a piece costs three RPCs (two batches and one WaitInterrupt) plus, without the
local fast path, one memory stream.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable

from xrt.errors import ErrorCode, XrtError
from xrt.hw import dma
from xrt.hw.dma import DMA_ERRORS
from xrt.hw.regs import DMA
from xrt.hw.targets import MIN_SIM_CYCLES_PER_S
from xrt.memory import MemChunk, MemRegion
from xrt.registers import RegRegion
from xrt.transport import NpuTransport

__all__ = ["DMA_ERRORS", "DmaEngine", "DmaMemRegion"]

_BUSY = DMA.register("STATUS").field("BUSY").mask
MAX_TRANSFER = 1 << 30  # bytes per programmed transfer (ROW_BYTES is 32 bits)
BUDGET_CYCLES_PER_BEAT = 4  # simulated-cycle budget of a transfer: 4x its beats ...
BUDGET_BASE_CYCLES = 200_000  # ... plus this (measured: ~1 beat per cycle)
MIN_WALL_S = 30.0


class DmaEngine:
    """The DMA channel of one device, used by its DMA-only memories and its ``udma`` region.

    Args:
        dma: The ``dma`` register region.
        transport: For `NpuTransport.wait_irq`.
        bounce: A chunk of host-visible memory reserved for staging.
        bus_bytes: Bytes per DMA beat (for cycle budgets).
        double_buffer: Overlap host copies with DMA transfers (see the module docstring).

    One transfer runs at a time (a lock): regions of one device share the engine.
    """

    def __init__(
        self,
        dma: RegRegion,
        transport: NpuTransport,
        bounce: MemChunk,
        *,
        bus_bytes: int = 16,
        double_buffer: bool = True,
    ) -> None:
        if bounce.size < 2:
            raise XrtError(ErrorCode.OUT_OF_RANGE, "the DMA bounce buffer needs at least 2 B")
        self._dma = dma
        self._transport = transport
        self._bounce = bounce
        self._bus = bus_bytes
        self.double_buffer = double_buffer
        self._lock = threading.RLock()
        self._regions: weakref.WeakSet[MemRegion] = weakref.WeakSet()
        self.transfers = 0
        """Transfers programmed so far (for tests and benches)."""

    @property
    def bounce(self) -> MemChunk:
        """The staging buffer in host-visible memory."""
        return self._bounce

    @property
    def staging(self) -> MemRegion:
        """The host-visible region the bounce buffer lives in."""
        region = self._bounce.region
        assert isinstance(region, MemRegion)  # chunks come only from MemRegion.malloc
        return region

    def attach(self, region: MemRegion) -> None:
        """Let the engine copy to and from `region` directly (its memories)."""
        self._regions.add(region)

    def reaches(self, region: MemRegion) -> bool:
        """True when `region` is one of the engine's memories."""
        return region in self._regions

    # -- one transfer ----------------------------------------------------------------------

    def _start(self, dst: int, src: int, n: int) -> None:
        ops = dma.program_ops(self._dma.base, dma.DmaTransfer(src, dst, n))
        try:
            self._dma.execute(ops)
        except XrtError as exc:
            if exc.code == ErrorCode.TIMEOUT:
                raise XrtError(
                    ErrorCode.TIMEOUT,
                    f"DMA engine still busy with an earlier transfer: {exc.message}",
                ) from None
            raise
        self.transfers += 1

    def _finish(self, dst: int, src: int, n: int) -> None:
        beats = math.ceil(n / self._bus) + 2
        budget = BUDGET_CYCLES_PER_BEAT * beats + BUDGET_BASE_CYCLES
        wall = max(MIN_WALL_S, budget / MIN_SIM_CYCLES_PER_S)
        what = f"DMA of {n} B from {src:#x} to {dst:#x}"
        base = self._dma.base
        if not self._transport.wait_irq(wall, budget):
            status = self._dma.read(base + DMA.offset("STATUS"))
            if status & _BUSY:
                self._dma.execute(dma.abort_ops(base))
                raise XrtError(
                    ErrorCode.TIMEOUT,
                    f"{what} did not finish within {budget} cycles / {wall:.0f} s "
                    f"(aborted; STATUS {status:#x})",
                )
        out = dma.decode_readout(self._dma.execute(dma.readout_ops(base, budget / 1e6)))
        if not out.ok:
            raise XrtError(ErrorCode.DEVICE_INTERNAL, f"{what} failed: {out.describe()}")

    def transfer(self, dst: int, src: int, n: int) -> None:
        """Copy `n` bytes from physical `src` to physical `dst` (ranges must not overlap),
        in programmed transfers of at most `MAX_TRANSFER` bytes, each waited for."""
        with self._lock:
            for off in range(0, n, MAX_TRANSFER):
                k = min(MAX_TRANSFER, n - off)
                self._start(dst + off, src + off, k)
                self._finish(dst + off, src + off, k)

    # -- staged transfers ------------------------------------------------------------------

    def _halves(self) -> tuple[list[int], int]:
        b = self._bounce
        addr = b.begin.addr
        if self.double_buffer:
            half = b.size // 2
            return [addr, addr + half], half
        return [addr], b.size

    def _pipeline(
        self,
        n: int,
        before: Callable[[int, int, int], None] | None,
        dma: Callable[[int, int, int], tuple[int, int]],
        after: Callable[[int, int, int], None] | None,
    ) -> None:
        """Run pieces through the bounce buffer: ``before`` (host -> bounce) for the next
        piece and ``after`` (bounce -> host) for the previous one overlap the DMA of the
        current one. Each callback gets (buffer address, offset, length)."""
        bufs, piece = self._halves()
        pieces = [(off, min(piece, n - off)) for off in range(0, n, piece)]
        if before is not None and pieces:
            before(bufs[0], *pieces[0])
        prev: tuple[int, int, int] | None = None
        for i, (off, k) in enumerate(pieces):
            buf = bufs[i % len(bufs)]
            dst, src = dma(buf, off, k)
            self._start(dst, src, k)
            if len(bufs) > 1:  # overlap host work with this DMA
                if before is not None and i + 1 < len(pieces):
                    before(bufs[(i + 1) % 2], *pieces[i + 1])
                if after is not None and prev is not None:
                    after(*prev)
                    prev = None
            self._finish(dst, src, k)
            if len(bufs) == 1:
                if after is not None:
                    after(buf, off, k)
                if before is not None and i + 1 < len(pieces):
                    before(bufs[0], *pieces[i + 1])
            else:
                prev = (buf, off, k)
        if after is not None and prev is not None:
            after(*prev)

    def write_from_host(self, addr: int, data: memoryview) -> None:
        """Host bytes -> device memory at `addr`, staged through the bounce buffer."""
        staging = self.staging
        with self._lock:
            self._pipeline(
                len(data),
                lambda buf, off, k: staging.write(buf, data[off : off + k]),
                lambda buf, off, k: (addr + off, buf),
                None,
            )

    def read_to_host(self, addr: int, out: memoryview) -> None:
        """Device memory at `addr` -> host bytes `out`, staged through the bounce buffer."""
        staging = self.staging
        with self._lock:
            self._pipeline(
                len(out),
                None,
                lambda buf, off, k: (buf, addr + off),
                lambda buf, off, k: staging.read(out[off : off + k], buf, k),
            )

    def move(self, dst: int, src: int, n: int) -> None:
        """memmove inside device memory: one DMA when the ranges do not overlap, else in
        pieces through the bounce buffer (in the order that keeps memmove semantics)."""
        if src + n <= dst or dst + n <= src:
            self.transfer(dst, src, n)
            return
        with self._lock:
            buf, piece = self._bounce.begin.addr, self._bounce.size
            starts = list(range(0, n, piece))
            if dst > src:
                starts.reverse()
            for off in starts:
                k = min(piece, n - off)
                self.transfer(buf, src + off, k)
                self.transfer(dst + off, buf, k)

    def try_copy(
        self, dst_region: MemRegion, dst: int, src_region: MemRegion, src: int, n: int
    ) -> bool:
        """`xrt.transport.CopyEngine`: one DMA when both regions are the engine's."""
        if not (self.reaches(dst_region) and self.reaches(src_region)):
            return False
        if dst_region is src_region:
            self.move(dst, src, n)
        else:
            self.transfer(dst, src, n)
        return True


class DmaMemRegion(MemRegion):
    """Device memory only the DMA engine reaches (``plddr``, ``ocm``): see the module
    docstring. Not host-visible: chunks get ADDR pointers and no views.

    Args:
        name: Region name.
        base: Physical address of the first byte.
        size: Bytes.
        engine: The device's DMA engine.
        min_alignment: Alignment of every chunk (default 64: whole DMA beats and cache lines).
    """

    def __init__(
        self, name: str, base: int, size: int, engine: DmaEngine, *, min_alignment: int = 64
    ) -> None:
        self._engine = engine
        super().__init__(name, base, size, min_alignment=min_alignment)
        engine.attach(self)

    @property
    def engine(self) -> DmaEngine:
        """The DMA engine that moves this region's bytes."""
        return self._engine

    def _read(self, addr: int, nbytes: int) -> bytearray:
        out = bytearray(nbytes)
        self._engine.read_to_host(addr, memoryview(out))
        return out

    def _write(self, addr: int, data: memoryview) -> None:
        self._engine.write_from_host(addr, data)

    def _memcpy(self, dst: int, src: int, nbytes: int) -> None:
        self._engine.move(dst, src, nbytes)

    def _memcpy_from(self, dst: int, src_region: MemRegion, src: int, nbytes: int) -> None:
        if not self._engine.try_copy(self, dst, src_region, src, nbytes):
            super()._memcpy_from(dst, src_region, src, nbytes)
