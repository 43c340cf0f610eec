"""Transports: what carries an NPU device's register accesses, memory bytes and interrupt.

The device classes (`xrt.npu_device`) are built on `NpuTransport` and never learn which one
they run on:

- `xrt.transport.grpc.GrpcTransport`: the emulator, ``grpc://HOST:PORT[/DEVICE]`` (imported
  only when such a URL is opened, so a runtime without grpcio still works);
- `xrt.transport.mmap.MmapTransport`: a real board through ``/dev/mem`` (or a file standing
  in for it), ``axi://BOARD?...``.

A transport describes the device (`NpuInfo`), makes register regions for its register blocks
(`NpuTransport.reg_region`) and memory regions for its host-visible windows
(`NpuTransport.host_region`: the CPU reaches them directly), waits for the interrupt line and
resets the device. Memories the CPU cannot reach (``plddr``, ``ocm``) are the device class's
business: it moves their bytes with the DMA engine, through the register regions, exactly as a
driver on the board does.

``docs/runtime-transports.md`` describes both transports, their URLs and the gRPC error table.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from xrt.errors import ErrorCode, XrtError
from xrt.hw.debug import DebugReply, DebugRequest
from xrt.hw.regmap import RegisterBlockInfo
from xrt.memory import MemRegion
from xrt.registers import RegRegion

__all__ = [
    "CopyEngine",
    "HostRegion",
    "MemoryInfo",
    "NpuInfo",
    "NpuTransport",
    "RegisterBlock",
]


@dataclass(frozen=True)
class RegisterBlock:
    """A register block at physical addresses ``[base, base + size)``."""

    name: str
    base: int
    size: int


@dataclass(frozen=True)
class MemoryInfo:
    """A memory of the device at physical addresses ``[base, base + size)``.

    Attributes:
        host_visible: True when the CPU reaches it directly (`NpuTransport.host_region`);
            False when only the DMA engine does.
    """

    name: str
    base: int
    size: int
    host_visible: bool = False

    @property
    def end(self) -> int:
        """First address past the memory."""
        return self.base + self.size


@dataclass(frozen=True)
class NpuInfo:
    """What a transport knows about the device it reaches.

    Attributes:
        name: Device name (``"npu0"`` on the emulator, the board name for ``axi://``).
        target: ``"buyi"`` or ``"zg330"``.
        register_blocks: Register blocks by name (``"npu"``, ``"dma"``).
        memories: Memories by name (``"udma"``, ``"plddr"``, ``"ocm"``).
        dma_bus_bytes: Bytes per DMA data beat.
        clock_period_ps: Device clock period, when known.
        hw_version: Hardware version string, when known.
        emulator_version: The simulator's software (``npu-emu 0.1.0``) when the device is
            simulated; empty for real hardware.
        warm_start: The device comes in a prepared state to keep (``serve --warm``: every
            lease starts from a checkpoint's), so opening it does not reset it.
    """

    name: str
    target: str
    register_blocks: Mapping[str, RegisterBlock]
    memories: Mapping[str, MemoryInfo]
    dma_bus_bytes: int = 16
    clock_period_ps: int | None = None
    hw_version: str = ""
    emulator_version: str = ""
    warm_start: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "register_blocks", MappingProxyType(dict(self.register_blocks)))
        object.__setattr__(self, "memories", MappingProxyType(dict(self.memories)))

    def block(self, name: str) -> RegisterBlock:
        """The register block `name`; XrtError 11010 lists the known ones."""
        try:
            return self.register_blocks[name]
        except KeyError:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"device {self.name} has no register block {name!r} "
                f"(has: {', '.join(self.register_blocks)})",
            ) from None

    def memory(self, name: str) -> MemoryInfo:
        """The memory `name`; XrtError 11010 lists the known ones."""
        try:
            return self.memories[name]
        except KeyError:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"device {self.name} has no memory {name!r} (has: {', '.join(self.memories)})",
            ) from None


class CopyEngine(Protocol):
    """Something that copies between device memories without the CPU (the DMA engine)."""

    def try_copy(
        self, dst_region: MemRegion, dst: int, src_region: MemRegion, src: int, n: int
    ) -> bool:
        """Copy `n` bytes if both regions are its own; False (nothing done) otherwise."""
        ...


class HostRegion(MemRegion):
    """Base of the transports' host-visible memory regions (``udma``).

    A device class may attach a `CopyEngine` (`copy_engine`): copies *into* this region from
    memories the CPU cannot reach (``plddr`` -> ``udma``) then run on the device, as a
    driver's would, instead of through the host.
    """

    copy_engine: CopyEngine | None = None

    def _memcpy_from(self, dst: int, src_region: MemRegion, src: int, nbytes: int) -> None:
        engine = self.copy_engine
        if engine is not None and engine.try_copy(self, dst, src_region, src, nbytes):
            return
        super()._memcpy_from(dst, src_region, src, nbytes)


class NpuTransport(ABC):
    """What a device class needs from any transport.

    Subclasses implement `reg_region`, `host_region`, `wait_irq`, `reset` and `_close`, and
    set `info` in their constructor.
    """

    info: NpuInfo

    def __init__(self) -> None:
        self._closed = False
        self._close_lock = threading.Lock()

    # -- regions ---------------------------------------------------------------------------

    @abstractmethod
    def reg_region(self, name: str, regmap: RegisterBlockInfo | None = None) -> RegRegion:
        """A register region over the block `name` (the whole block the hardware decodes).

        Raises:
            XrtError: 11010 for an unknown block.
        """

    @abstractmethod
    def host_region(
        self,
        name: str = "udma",
        *,
        base: int | None = None,
        size: int | None = None,
        min_alignment: int = 64,
    ) -> HostRegion:
        """A memory region over the host-visible memory `name`, or a window of it.

        Args:
            name: A host-visible memory (``"udma"``).
            base: First address of the window (default: the memory's base).
            size: Bytes of the window (default: to the memory's end).
            min_alignment: Alignment of every chunk allocated from the region.

        Raises:
            XrtError: 11010 for an unknown or not host-visible memory, 11003 for a window
                outside it.
        """

    def _window(self, name: str, base: int | None, size: int | None) -> tuple[MemoryInfo, int, int]:
        """Check a window of a host-visible memory; return (memory, base, size)."""
        mem = self.info.memory(name)
        if not mem.host_visible:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"memory {name!r} of {self.info.name} is not host-visible: only the DMA engine "
                f"reaches it (use the device's {name!r} region)",
            )
        b = mem.base if base is None else base
        n = mem.end - b if size is None else size
        if not (isinstance(b, int) and isinstance(n, int)) or isinstance(b, bool):
            raise XrtError(ErrorCode.WRONG_TYPE, f"window base and size must be ints: {b!r}, {n!r}")
        if b < mem.base or n < 0 or b + n > mem.end:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"window [{b:#x}, {b + n:#x}) is outside memory {name!r} "
                f"[{mem.base:#x}, {mem.end:#x})",
            )
        return mem, b, n

    # -- time and interrupt ----------------------------------------------------------------

    @property
    def has_irq(self) -> bool:
        """True when `wait_irq` can wait for the interrupt line."""
        return True

    @abstractmethod
    def wait_irq(self, timeout_s: float, max_cycles: int | None = None) -> bool:
        """Wait until the device's interrupt line is high.

        Args:
            timeout_s: Wall-clock seconds to wait at most (0: just look).
            max_cycles: Simulated cycles to wait at most (emulator only; ignored by real
                hardware, whose clock nobody counts).

        Returns:
            True when the line is high, False when a limit passed first.
        """

    @abstractmethod
    def reset(self) -> None:
        """Pulse the device's reset: registers return to their reset values; memories keep
        their contents."""

    @property
    def can_reset(self) -> bool:
        """True when `reset` can pulse the device's reset (the emulator); a board whose
        reset is not mapped says False (its `reset` raises 11012)."""
        return True

    @property
    def cycles(self) -> int | None:
        """Simulated clock cycles at the last response (None on real hardware)."""
        return None

    def checkpoint(self, path: str | os.PathLike[str], wait_cycles: int = 0) -> int:
        """Save the device's whole state into `path` (the emulator's devices only)."""
        raise XrtError(
            ErrorCode.WRONG_ORDER,
            "checkpoints are a feature of the emulator's devices (grpc://), "
            f"not of {self.info.name}",
        )

    def restore(self, path: str | os.PathLike[str], portable: bool = False) -> int:
        """Put a checkpoint's state into the device (the emulator's devices only); only its
        memories and configuration registers when `portable`."""
        raise XrtError(
            ErrorCode.WRONG_ORDER,
            "checkpoints are a feature of the emulator's devices (grpc://), "
            f"not of {self.info.name}",
        )

    # -- the debugger (simulated devices: xrt.npu_device.debugger) -------------------------

    def debug(self, request: DebugRequest) -> DebugReply:
        """One request of the debugger (`xrt.hw.debug`) to the simulation's stop unit."""
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"{self.info.name} has no debugger: breakpoints are a simulated device's (sim://)",
        )

    def wait_debug_stop(self, after: int, timeout_s: float) -> bool:
        """Wait until the device stopped more than `after` times (`DebugReply.stops`);
        False when `timeout_s` passed first."""
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"{self.info.name} has no debugger: breakpoints are a simulated device's (sim://)",
        )

    # -- closing ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise XrtError(ErrorCode.WRONG_ORDER, f"transport to {self.info.name} is closed")

    @abstractmethod
    def _close(self) -> None:
        """Release connections, leases and mappings; called once."""

    def close(self) -> None:
        """Close the transport (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._close()

    def __enter__(self) -> NpuTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
