"""The mmap transport: a real board's NPU through ``/dev/mem`` (``axi://BOARD?...``).

`MmapTransport` maps each register block and the host-visible memory (``udma``) from one
file at offsets equal to their physical addresses, exactly as ``/dev/mem`` exposes them.
Any file laid out the same way works in its place: tests use a sparse temporary file as
large as the highest mapped address (``truncate -s``), so the same code runs against a file
and against the board.

- Registers (`MmapRegRegion`) are 32-bit loads and stores through the mapping (one
  ``memoryview.cast("I")`` element each); the data model makes masked writes atomic against
  other threads of this process.
- Host-visible memory (`MmapMemRegion`) is the mapping itself: BOTH pointers, zero-copy views.
- Interrupts: with ``uio=/dev/uioN`` (a UIO device bound to the NPU's interrupt), `wait_irq`
  unmasks it and waits on the file; without, it polls the two blocks' ``INT_STATUS &
  INT_ENABLE`` (the line is their OR, docs/hardware.md) every `POLL_INTERVAL_S`. On a plain
  file nothing raises interrupts unless someone writes those registers.
- Reset: a board's PL reset is not reachable through these registers; `reset` raises 11012.

URL: ``axi://BOARD?npu=0x40000000&dma=0x80000000&target=buyi&file=/dev/mem`` plus optional
``udma=``/``udma_size=`` (the host-visible window; default from the target's configuration)
and ``uio=``. Addresses must be multiples of the page size.
"""

from __future__ import annotations

import mmap
import os
import select
import stat
import time
from collections.abc import Mapping

from xrt._checks import as_seconds
from xrt.device import DeviceURL
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.regs import DMA, NPU
from xrt.hw.targets import target as target_config
from xrt.registers import RegRegion
from xrt.transport import HostRegion, MemoryInfo, NpuInfo, NpuTransport, RegisterBlock

__all__ = ["POLL_INTERVAL_S", "URL_PARAMS", "MmapMemRegion", "MmapRegRegion", "MmapTransport"]

POLL_INTERVAL_S = 200e-6
"""Interval between looks at the interrupt registers when no UIO device is given."""

URL_PARAMS = ("npu", "dma", "target", "file", "udma", "udma_size", "uio")
"""Query parameters of ``axi://`` URLs that the transport reads."""

_IRQ_REGS = (
    ("npu", NPU.register("INT_STATUS").offset, NPU.register("INT_ENABLE").offset),
    ("dma", DMA.register("INT_STATUS").offset, DMA.register("INT_ENABLE").offset),
)


class MmapTransport(NpuTransport):
    """An NPU reached through memory mappings of ``/dev/mem`` or a file laid out like it.

    Args:
        path: ``/dev/mem`` on a board, or a regular file at least as large as the highest
            mapped address.
        target: ``"buyi"`` or ``"zg330"``: the memory map (`xrt.hw.targets.target`).
        name: Device name (the URL's board name).
        npu_base, dma_base: Register block bases (default: the target's).
        udma_base, udma_size: Host-visible window (default: the target's ``udma``).
        uio: A UIO device file delivering the NPU's interrupt (optional).

    Raises:
        XrtError: 11002 when `path` (or `uio`) does not exist, 11003 for addresses that are
            not page-aligned or a file too small for them, 11010 for an unknown target,
            11014 when the file cannot be opened or mapped.
    """

    def __init__(
        self,
        path: str = "/dev/mem",
        *,
        target: str = "buyi",
        name: str = "axi",
        npu_base: int | None = None,
        dma_base: int | None = None,
        udma_base: int | None = None,
        udma_size: int | None = None,
        uio: str | None = None,
    ) -> None:
        super().__init__()
        cfg = target_config(target)
        udma = cfg.memory("udma")
        blocks = {
            "npu": RegisterBlock("npu", _addr(npu_base, cfg.npu_base, "npu"), cfg.reg_block_size),
            "dma": RegisterBlock("dma", _addr(dma_base, cfg.dma_base, "dma"), cfg.reg_block_size),
        }
        ub = _addr(udma_base, udma.base, "udma")
        us = _addr(udma_size, udma.size, "udma_size")
        if us == 0:
            raise XrtError(ErrorCode.OUT_OF_RANGE, "udma_size must be > 0")
        memories = {m.name: MemoryInfo(m.name, m.base, m.size) for m in cfg.memories}
        memories["udma"] = MemoryInfo("udma", ub, us, host_visible=True)
        self.info = NpuInfo(
            name=name,
            target=cfg.name,
            register_blocks=blocks,
            memories=memories,
            hw_version="",
        )
        self.path = path
        self._maps: dict[str, mmap.mmap] = {}
        self._views: dict[str, memoryview] = {}
        self._uio_fd: int | None = None
        fd = _open(path, os.O_RDWR | os.O_SYNC, "memory file")
        try:
            spans = {n: (b.base, b.size) for n, b in blocks.items()} | {"udma": (ub, us)}
            self._check_size(fd, spans)
            for region, (base, size) in spans.items():
                try:
                    self._maps[region] = mmap.mmap(fd, size, offset=base)
                except (OSError, ValueError, OverflowError) as exc:
                    raise XrtError(
                        ErrorCode.DEVICE_INTERNAL,
                        f"cannot map {region} [{base:#x}, {base + size:#x}) of {path}: {exc}",
                    ) from None
                self._views[region] = memoryview(self._maps[region])
            if uio is not None:
                self._uio_fd = _open(uio, os.O_RDWR, "UIO device")
        except BaseException:
            self._close()
            raise
        finally:
            os.close(fd)
        self._words = {n: self._views[n].cast("I") for n in blocks}

    def _check_size(self, fd: int, spans: Mapping[str, tuple[int, int]]) -> None:
        page = mmap.PAGESIZE
        for region, (base, size) in spans.items():
            if base % page or size % 4:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{region} at {base:#x} ({size:#x} B): mappings start on a page "
                    f"({page} B) and registers are 4-byte words",
                )
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            need = max(b + s for b, s in spans.values())
            if st.st_size < need:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{self.path} holds {st.st_size:#x} B; the map needs {need:#x} "
                    f"(make it sparse with `truncate -s {need} {self.path}`)",
                )

    @classmethod
    def from_url(cls, url: DeviceURL | str) -> MmapTransport:
        """Open what an ``axi://`` URL names (see the module docstring).

        Raises:
            XrtError: 11010 for parameters of the wrong type, and what the constructor raises.
        """
        u = DeviceURL.parse(url) if isinstance(url, str) else url
        if u.scheme != "axi":
            raise XrtError(ErrorCode.WRONG_TYPE, f"{u.raw!r} is not an axi:// URL")
        strings = {}
        for key in ("target", "file", "uio"):
            value = u.params.get(key)
            if value is not None and (not isinstance(value, str) or not value):
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"device URL {u.raw!r}: {key}={value!r} must be text"
                )
            strings[key] = value
        return cls(
            strings["file"] or "/dev/mem",
            target=strings["target"] or "buyi",
            name=u.host or "axi",
            npu_base=u.get_int("npu"),
            dma_base=u.get_int("dma"),
            udma_base=u.get_int("udma"),
            udma_size=u.get_int("udma_size"),
            uio=strings["uio"],
        )

    # -- regions ---------------------------------------------------------------------------

    def reg_region(self, name: str, regmap: RegisterBlockInfo | None = None) -> MmapRegRegion:
        self._check_open()
        block = self.info.block(name)
        return MmapRegRegion(self, name, block.base, block.size, regmap=regmap)

    def host_region(
        self,
        name: str = "udma",
        *,
        base: int | None = None,
        size: int | None = None,
        min_alignment: int = 64,
    ) -> MmapMemRegion:
        self._check_open()
        mem, b, n = self._window(name, base, size)
        view = self._views[name][b - mem.base : b - mem.base + n]
        return MmapMemRegion(self, name, b, n, view, min_alignment=min_alignment)

    # -- interrupt -------------------------------------------------------------------------

    def irq_pending(self) -> bool:
        """The interrupt line's level as the registers tell it:
        ``INT_STATUS & INT_ENABLE`` of ``npu`` or ``dma`` is not zero."""
        self._check_open()
        for block, status, enable in _IRQ_REGS:
            words = self._words[block]
            if words[status // 4] & words[enable // 4]:
                return True
        return False

    def wait_irq(self, timeout_s: float, max_cycles: int | None = None) -> bool:
        """Wait for the interrupt (UIO when given, else polling the registers); `max_cycles`
        is ignored: nobody counts a real clock's cycles."""
        t = as_seconds(timeout_s, "timeout_s")
        deadline = time.monotonic() + t
        if self.irq_pending():
            return True
        if self._uio_fd is not None:
            return self._wait_uio(deadline)
        while time.monotonic() < deadline:
            time.sleep(min(POLL_INTERVAL_S, max(0.0, deadline - time.monotonic())))
            if self.irq_pending():
                return True
        return False

    def _wait_uio(self, deadline: float) -> bool:
        fd = self._uio_fd
        assert fd is not None
        os.write(fd, (1).to_bytes(4, "little"))  # unmask
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self.irq_pending()
            readable, _, _ = select.select([fd], [], [], remaining)
            if readable:
                os.read(fd, 4)  # the interrupt count
                return True

    @property
    def can_reset(self) -> bool:
        return False

    def reset(self) -> None:
        """Not available: a board's reset is not one of these registers."""
        self._check_open()
        raise XrtError(
            ErrorCode.WRONG_ORDER,
            f"{self.info.name}: axi:// cannot pulse the NPU's reset (the PL reset is not "
            "mapped); reload the bitstream or use the board's reset",
        )

    # -- closing ---------------------------------------------------------------------------

    def _close(self) -> None:
        for words in getattr(self, "_words", {}).values():
            words.release()
        for name, mapped in list(self._maps.items()):
            view = self._views.pop(name, None)
            try:
                if view is not None:
                    view.release()
                mapped.close()
            except BufferError:
                pass  # chunks still hold views of udma: the mapping goes with them
        self._maps.clear()
        if self._uio_fd is not None:
            os.close(self._uio_fd)
            self._uio_fd = None

    def __repr__(self) -> str:
        return f"<MmapTransport {self.path} {self.info.target}{' closed' if self._closed else ''}>"


def _addr(value: int | None, default: int, what: str) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise XrtError(ErrorCode.WRONG_TYPE, f"{what} must be an int, got {value!r}")
    if value < 0 or value >= 1 << 64:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}={value:#x} is not a 64-bit address")
    return value


def _open(path: str, flags: int, what: str) -> int:
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"{what} {path} does not exist") from None
    except OSError as exc:
        raise XrtError(ErrorCode.DEVICE_INTERNAL, f"cannot open {what} {path}: {exc}") from None


class MmapRegRegion(RegRegion):
    """A register block through a mapping: one 32-bit load or store per access."""

    def __init__(
        self,
        transport: MmapTransport,
        name: str,
        base: int,
        size: int,
        *,
        regmap: RegisterBlockInfo | None = None,
    ) -> None:
        self._t = transport
        super().__init__(name, base, size, regmap=regmap)

    def _read32(self, addr: int) -> int:
        self._t._check_open()
        return int(self._t._words[self.name][(addr - self.base) >> 2])

    def _write32(self, addr: int, value: int) -> None:
        self._t._check_open()
        self._t._words[self.name][(addr - self.base) >> 2] = value


class MmapMemRegion(HostRegion):
    """Host-visible memory through a mapping (always host-visible: zero-copy)."""

    def __init__(
        self,
        transport: MmapTransport,
        name: str,
        base: int,
        size: int,
        view: memoryview,
        *,
        min_alignment: int = 64,
    ) -> None:
        self._t = transport
        self._view = view
        super().__init__(name, base, size, min_alignment=min_alignment)

    def _read(self, addr: int, nbytes: int) -> bytes:
        off = addr - self.base
        return bytes(self._view[off : off + nbytes])

    def _write(self, addr: int, data: memoryview) -> None:
        off = addr - self.base
        self._view[off : off + len(data)] = data

    def _host_map(self) -> memoryview:
        return self._view
