"""The checks docs/isa.md lists for each instruction, before it starts.

`static_fault` answers the first failed check of one instruction as an `EngineError` and
a message, in the order the engine applies them: ILLEGAL_INSTRUCTION (encoding, counts,
bounds, token flags), then MISALIGNED, ADDR_RANGE and BUFFER_RANGE. Every check depends
only on the instruction, the base registers, the memory windows and the buffer sizes, so
the executor and the checker share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xrt.hw.config import MemoryWindow, NpuConfig
from xrt.hw.isa import (
    Buffer,
    EngineError,
    Finish,
    Gemm,
    GemmInit,
    Instruction,
    IsaError,
    Load,
    Store,
    StoreMode,
    Sync,
    Vec,
    VecFunc,
)

from . import footprint as fp
from .tokens import token_ops

__all__ = ["SHIFT_IMM_MAX", "Fault", "static_fault", "window_of"]

SHIFT_IMM_MAX = 46
"""Largest STORE ``shift`` immediate."""


@dataclass(frozen=True)
class Fault:
    """A failed check: the engine's error code and a message naming the bad value."""

    code: EngineError
    message: str


def window_of(windows: Sequence[MemoryWindow], addr: int, nbytes: int) -> MemoryWindow | None:
    """The window holding all of ``[addr, addr + nbytes)``, or None."""
    for w in windows:
        if w.contains(addr, nbytes):
            return w
    return None


def static_fault(
    insn: Instruction,
    bases: Sequence[int],
    windows: Sequence[MemoryWindow],
    config: NpuConfig,
    *,
    encoded: bool = False,
) -> Fault | None:
    """The first check ``insn`` fails, or None.

    Args:
        insn: The instruction.
        bases: Values of the base registers.
        windows: Memory windows the engine reaches.
        config: Buffer sizes.
        encoded: True when ``insn`` was decoded from bytes (its fields are known to fit).
    """
    name = type(insn).__name__.upper()
    if not encoded and not _fields_fit(insn):
        try:
            insn.to_word()
        except IsaError as exc:
            return Fault(EngineError.ILLEGAL_INSTRUCTION, str(exc))
    _, _, bad_flag = token_ops(insn)
    if bad_flag is not None:
        where = f"unit {insn.unit.name}" if isinstance(insn, Sync) else "this unit"
        return Fault(
            EngineError.ILLEGAL_INSTRUCTION, f"{name}: {bad_flag} does not exist on {where}"
        )
    if isinstance(insn, Load):
        return _load(insn, bases, windows, config)
    if isinstance(insn, Store):
        return _store(insn, bases, windows, config)
    if isinstance(insn, Gemm):
        return _gemm(insn, config)
    if isinstance(insn, Vec):
        return _vec(insn, config)
    if isinstance(insn, Sync | Finish):
        return None
    raise TypeError(f"not an instruction: {insn!r}")


_RANGES: dict[type, list[tuple[str, int, int, frozenset | None]]] = {}


def _fields_fit(insn: Instruction) -> bool:
    """True when every field fits its width (a fast path of ``insn.to_word()``)."""
    cls = type(insn)
    ranges = _RANGES.get(cls)
    if ranges is None:
        ranges = []
        for spec in cls.FIELDS:
            w = spec.width
            if spec.kind == "sint":
                ranges.append((spec.name, -(1 << (w - 1)), (1 << (w - 1)) - 1, None))
            elif spec.kind == "enum":
                assert spec.enum is not None
                ranges.append((spec.name, 0, 0, frozenset(int(v) for v in spec.enum)))
            else:
                ranges.append((spec.name, 0, (1 << w) - 1, None))
        _RANGES[cls] = ranges
    d = insn.__dict__
    for name, lo, hi, allowed in ranges:
        v = d[name]
        if allowed is not None:
            if v not in allowed:
                return False
        elif not (isinstance(v, int) and lo <= v <= hi):
            return False
    return True


def _illegal(msg: str) -> Fault:
    return Fault(EngineError.ILLEGAL_INSTRUCTION, msg)


def _counts(name: str, insn: Instruction, fields: Sequence[str]) -> Fault | None:
    for f in fields:
        if getattr(insn, f) < 1:
            return _illegal(f"{name}: {f}={getattr(insn, f)} (counts are 1..1023)")
    return None


def _memory(
    name: str,
    first: int,
    strides: Sequence[tuple[str, int]],
    last: int,
    nbytes: int,
    windows: Sequence[MemoryWindow],
    block: int,
) -> Fault | None:
    """Alignment of the first address and strides, then the whole span in one window."""
    if first % block:
        return Fault(
            EngineError.MISALIGNED, f"{name}: address {first:#x} is not a multiple of {block} bytes"
        )
    for field, stride in strides:
        if stride % block:
            return Fault(
                EngineError.MISALIGNED,
                f"{name}: {field}={stride} is not a multiple of {block} bytes",
            )
    if window_of(windows, first, last + nbytes - first) is None:
        return Fault(
            EngineError.ADDR_RANGE,
            f"{name}: bytes [{first:#x}, {last + nbytes:#x}) are not inside one memory window",
        )
    return None


def _rows(name: str, what: str, lo: int, hi: int, rows: int) -> Fault | None:
    if lo < 0 or hi >= rows:
        return Fault(
            EngineError.BUFFER_RANGE,
            f"{name}: {what} rows {lo}..{hi} outside the buffer's {rows} rows",
        )
    return None


def _base(name: str, insn: Load | Store, bases: Sequence[int]) -> int:
    return (bases[insn.base] if insn.base < len(bases) else 0) + insn.offset


def _load(
    insn: Load, bases: Sequence[int], windows: Sequence[MemoryWindow], config: NpuConfig
) -> Fault | None:
    name = "LOAD"
    if f := _counts(name, insn, ("x_size", "y_size", "z_size")):
        return f
    if insn.buffer != Buffer.INP:
        for f_ in ("pad_top", "pad_bottom", "pad_left", "pad_right", "pad_min"):
            if getattr(insn, f_):
                value = int(getattr(insn, f_))
                return _illegal(f"{name}: {f_}={value} needs buffer INP, not {insn.buffer.name}")
    e = fp.elem_bytes(insn.buffer, config.block)
    first = _base(name, insn, bases)
    last = first + (insn.z_size - 1) * insn.z_stride + (insn.y_size - 1) * insn.y_stride
    last += (insn.x_size - 1) * insn.x_stride
    strides = [
        ("x_stride", insn.x_stride),
        ("y_stride", insn.y_stride),
        ("z_stride", insn.z_stride),
    ]
    if f := _memory(name, first, strides, last, e, windows, config.block):
        return f
    _, _, n = fp.load_geometry(insn)
    return _rows(
        name, insn.buffer.name, insn.sram, insn.sram + n - 1, fp.buffer_rows(insn.buffer, config)
    )


def _store(
    insn: Store, bases: Sequence[int], windows: Sequence[MemoryWindow], config: NpuConfig
) -> Fault | None:
    name = "STORE"
    if f := _counts(name, insn, ("x_size", "y_size", "z_size")):
        return f
    if insn.lo > insn.hi:
        return _illegal(f"{name}: lo={insn.lo} > hi={insn.hi}")
    if insn.shift > SHIFT_IMM_MAX:
        return _illegal(f"{name}: shift={insn.shift} > {SHIFT_IMM_MAX}")
    if insn.use_prm and insn.shift:
        return _illegal(f"{name}: shift={insn.shift} must be 0 when use_prm = 1")
    e = fp.store_elem_bytes(insn, config.block)
    first = _base(name, insn, bases)
    last = first + (insn.z_size - 1) * insn.z_stride + (insn.y_size - 1) * insn.y_stride
    last += (insn.x_size - 1) * insn.x_stride
    strides = [
        ("x_stride", insn.x_stride),
        ("y_stride", insn.y_stride),
        ("z_stride", insn.z_stride),
    ]
    if f := _memory(name, first, strides, last, e, windows, config.block):
        return f
    hi = insn.sram + (insn.z_size - 1) * insn.sram_z_stride + (insn.y_size - 1) * insn.sram_y_stride
    hi += (insn.x_size - 1) * insn.sram_x_stride
    if f := _rows(name, "ACC", insn.sram, hi, config.acc_rows):
        return f
    if insn.use_prm and insn.mode == StoreMode.INT8:  # INT32 reads no PRM row
        return _rows(name, "PRM", insn.m_or_prm, insn.m_or_prm + insn.z_size - 1, config.prm_rows)
    return None


def _gemm(insn: Gemm, config: NpuConfig) -> Fault | None:
    name = "GEMM"
    if f := _counts(name, insn, ("n0", "n1", "n2")):
        return f
    for operand, buf, rows in (
        ("acc", "ACC", config.acc_rows),
        ("inp", "INP", config.inp_rows),
        ("wgt", "WGT", config.wgt_rows),
    ):
        lo, hi = fp.extremes(getattr(insn, operand), fp.gemm_loops(insn, operand))
        if f := _rows(name, f"{operand} ({buf})", lo, hi, rows):
            return f
    if insn.init == GemmInit.BIAS:
        return _rows(name, "bias (ACC)", insn.bias, insn.bias, config.acc_rows)
    return None


def _vec(insn: Vec, config: NpuConfig) -> Fault | None:
    name = "VEC"
    if f := _counts(name, insn, ("n0", "n1")):
        return f
    if insn.func == VecFunc.LUT:
        if insn.a_acc or insn.b_acc:
            return _illegal(
                f"{name}: LUT takes A from INP (a_acc={int(insn.a_acc)}, b_acc={int(insn.b_acc)})"
            )
        if insn.b >= config.lut_tables:
            return Fault(
                EngineError.BUFFER_RANGE,
                f"{name}: LUT table b={insn.b} >= {config.lut_tables} tables",
            )
    lo, hi = fp.extremes(insn.dst, fp.vec_loops(insn, "dst"))
    if f := _rows(name, "dst (ACC)", lo, hi, config.acc_rows):
        return f
    for operand, buf in fp.vec_reads(insn):
        lo, hi = fp.extremes(getattr(insn, operand), fp.vec_loops(insn, operand))
        rows = config.acc_rows if buf == Buffer.ACC else config.inp_rows
        if f := _rows(name, f"{operand} ({buf.name})", lo, hi, rows):
            return f
    return None
