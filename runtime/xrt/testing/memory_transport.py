"""An in-memory transport, for tests only: regions over host memory, registers in a dict.

- `MemoryMemRegion`: a `MemRegion` over an anonymous mmap (zero pages cost nothing until
  touched), host-visible or not (to exercise both paths of the base class).
- `MemoryRegRegion`: a `RegRegion` whose registers live in a dict. With a register map
  attached it models a PeakRDL-style CSR block: reset values, read-only fields ignore
  writes (tests set them with `MemoryRegRegion.hw_set`), write-1-to-clear/set/toggle and
  write-0 variants, single-pulse fields (read 0; each written 1 is recorded in `pulses`),
  write-only fields (read 0), clear-on-read fields, unmapped addresses (read 0, writes
  ignored). `on_read`/`on_write` callbacks let a test play the hardware.
- `MemoryDevice`: registered as ``mem://``; a device shaped like the NPU board of
  ``docs``/DESIGN.md (``npu`` and ``dma`` register blocks, ``udma`` host-visible memory,
  ``plddr`` default memory, optional ``ocm``), every base and size settable in the URL.

Nothing here is used by the runtime itself.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Mapping, Sequence

from xrt.device import Device, DeviceURL, register_device
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regmap import FieldInfo, RegisterBlockInfo
from xrt.memory import MemRegion
from xrt.registers import MASK32, RegOp, RegRegion

__all__ = ["MemoryDevice", "MemoryMemRegion", "MemoryRegRegion"]


class MemoryMemRegion(MemRegion):
    """A memory region over host memory.

    Args:
        name: Region name.
        base: Physical base address.
        size: Bytes.
        host_visible: Offer a host map (zero-copy path) or force the `_read`/`_write` path.
        min_alignment: Minimum chunk alignment.

    Attributes:
        reads, writes: How many times the `_read`/`_write` hooks ran.
    """

    def __init__(
        self,
        name: str,
        base: int,
        size: int,
        *,
        host_visible: bool = True,
        min_alignment: int = 1,
    ) -> None:
        self._mem = mmap.mmap(-1, max(size, 1))
        self._bytes = memoryview(self._mem)[:size]
        self._visible = host_visible
        self.reads = 0
        self.writes = 0
        super().__init__(name, base, size, min_alignment=min_alignment)

    def _read(self, addr: int, nbytes: int) -> bytes:
        self.reads += 1
        off = addr - self.base
        return bytes(self._bytes[off : off + nbytes])

    def _write(self, addr: int, data: memoryview) -> None:
        self.writes += 1
        off = addr - self.base
        self._bytes[off : off + len(data)] = data

    def _host_map(self) -> memoryview | None:
        return self._bytes if self._visible else None


class MemoryRegRegion(RegRegion):
    """Registers in a dict, with a small model of a CSR block when a map is attached.

    Attributes:
        on_read: Called with the register offset before each bus read.
        on_write: Called with (offset, value) after each bus write.
        log: Every bus access: ``("r" | "w", offset, value)``.
        pulses: ``(offset, field name)`` for every 1 written to a single-pulse field.
        batches: How many times `_batch` ran (one per `execute`).
    """

    def __init__(
        self,
        name: str,
        base: int,
        size: int | None = None,
        *,
        regmap: RegisterBlockInfo | None = None,
    ) -> None:
        self._values: dict[int, int] = {}
        self.on_read: Callable[[int], None] | None = None
        self.on_write: Callable[[int, int], None] | None = None
        self.log: list[tuple[str, int, int]] = []
        self.pulses: list[tuple[int, str]] = []
        self.batches = 0
        super().__init__(name, base, size, regmap=regmap)

    def attach_regmap(self, regmap: RegisterBlockInfo) -> None:
        super().attach_regmap(regmap)
        self.reset()

    def reset(self) -> None:
        """Every register back to its reset value (0 without a map)."""
        self._values.clear()
        if self.regmap is not None:
            for reg in self.regmap:
                self._values[reg.offset] = reg.reset

    def hw_set(self, offset: int, value: int, mask: int = MASK32) -> None:
        """Change stored bits as the hardware would (no access rules, no log)."""
        old = self._values.get(offset, 0)
        self._values[offset] = (old & ~mask) | (value & mask)

    def hw_get(self, offset: int) -> int:
        """The stored value, bypassing read side effects."""
        return self._values.get(offset, 0)

    def _read32(self, addr: int) -> int:
        off = addr - self.base
        if self.on_read is not None:
            self.on_read(off)
        stored = self._values.get(off, 0)
        value = stored
        if self.regmap is not None:
            reg = self.regmap.at(off)
            if reg is None:
                value = 0
            else:
                for f in reg.fields:
                    if "r" not in f.sw or f.singlepulse:
                        value &= ~f.mask
                    if f.onread == "rclr":
                        self._values[off] = self._values.get(off, 0) & ~f.mask
                    elif f.onread == "rset":
                        self._values[off] = self._values.get(off, 0) | f.mask
        self.log.append(("r", off, value))
        return value

    def _write32(self, addr: int, value: int) -> None:
        off = addr - self.base
        self.log.append(("w", off, value))
        if self.regmap is None:
            self._values[off] = value
        else:
            reg = self.regmap.at(off)
            if reg is not None:
                stored = self._values.get(off, 0)
                for f in reg.fields:
                    stored = _write_field(f, stored, value, off, self.pulses)
                self._values[off] = stored
        if self.on_write is not None:
            self.on_write(off, value)

    def _batch(self, ops: Sequence[RegOp]) -> list[int | None]:
        self.batches += 1
        return super()._batch(ops)


def _write_field(f: FieldInfo, stored: int, written: int, off: int, pulses: list) -> int:
    bits = written & f.mask
    if "w" not in f.sw:
        return stored
    if f.singlepulse:
        if bits:
            pulses.append((off, f.name))
        return stored & ~f.mask
    op = f.onwrite
    if not op:
        return (stored & ~f.mask) | bits
    if op == "woclr":
        return stored & ~bits
    if op == "woset":
        return stored | bits
    if op == "wot":
        return stored ^ bits
    zeros = ~written & f.mask
    if op == "wzc":
        return stored & ~zeros
    if op == "wzs":
        return stored | zeros
    if op == "wzt":
        return stored ^ zeros
    if op == "wclr":
        return stored & ~f.mask
    if op == "wset":
        return stored | f.mask
    raise XrtError(ErrorCode.WRONG_TYPE, f"field {f.name}: onwrite {op!r} is not modelled")


def _default_maps() -> dict[str, RegisterBlockInfo]:
    try:
        from xrt.hw.regs import DMA, NPU
    except ImportError:  # pragma: no cover - the generated maps are part of the package
        return {}
    return {"npu": NPU, "dma": DMA}


@register_device("mem://")
class MemoryDevice(Device):
    """A device of in-memory regions shaped like the NPU board (for tests).

    URL parameters (all optional): ``npu``, ``dma`` (register block bases, default
    0x40000000 and 0x80000000), ``plddr``/``plddr_size`` (default 0x0 / 16 MiB, the default
    memory region, not host-visible), ``udma``/``udma_size`` (default 0x10000000 / 1 MiB,
    host-visible), ``ocm``/``ocm_size`` (absent unless ``ocm_size`` is given),
    ``align`` (minimum chunk alignment, default 64).

    Args:
        url: Parsed URL (or None for the defaults).
        regmaps: Register maps by block name; default: the generated NPU and DMA maps.
    """

    def __init__(
        self,
        url: DeviceURL | str | None = None,
        *,
        regmaps: Mapping[str, RegisterBlockInfo] | None = None,
    ) -> None:
        super().__init__(url if url is not None else DeviceURL.parse("mem://"))
        assert self._url is not None
        p = self._url
        maps = _default_maps() if regmaps is None else dict(regmaps)
        align = p.get_int("align", 64)
        assert align is not None
        for name, default_base in (("npu", 0x4000_0000), ("dma", 0x8000_0000)):
            base = p.get_int(name, default_base)
            assert base is not None
            regmap = maps.get(name)
            size = None if regmap is not None else 0x1000
            self.add_region(MemoryRegRegion(name, base, size, regmap=regmap))
        mems = [
            ("plddr", 0x0, 16 << 20, False),
            ("udma", 0x1000_0000, 1 << 20, True),
            ("ocm", 0x2000_0000, 0, False),
        ]
        for name, default_base, default_size, visible in mems:
            size = p.get_int(f"{name}_size", default_size)
            base = p.get_int(name, default_base)
            assert size is not None and base is not None
            if size:
                region = MemoryMemRegion(
                    name, base, size, host_visible=visible, min_alignment=align
                )
                self.add_region(region, default=name == "plddr")
