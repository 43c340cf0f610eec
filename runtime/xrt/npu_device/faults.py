"""Faults on cue: the simulator's fault controller, driven by name.

A simulated NPU has a fault controller beside it on the register bus (the ``fault``
register block, rtl/regs/fault.rdl): it makes the NPU's memories answer a burst with an
error, stall it or flip a bit of it, drops, delays or fakes an interrupt, and makes a
register read return a given value, on the N-th event or from a cycle on, once or every
time. It acts in the simulation, so the RTL and the driver see what they would see on
silicon; being registers, faults travel every route registers do, are recorded and
replayed, and go with the rest of the device's state at a lease's end.

One spelling everywhere (``xrt run --fault``, ``npu-emu``, `NpuDevice.inject_fault`)::

    KIND[:ARG...][@TRIGGER]

TRIGGER is ``N`` (the N-th event, default 1) or ``cycle=C`` (armed C cycles after the
injection, then the first event), either followed by ``+`` for every event after too.
docs/debugging.md ("Faults on cue") has the kinds, their arguments and what the runtime
reports for each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import TargetConfig
from xrt.hw.regops import RegRead, RegWrite
from xrt.hw.regs import DMA, FAULT, NPU

if TYPE_CHECKING:
    from xrt.registers import RegRegion

__all__ = ["FAULT_KINDS", "Fault", "FaultController", "FaultStatus", "parse_fault"]

FAULT_KINDS: dict[str, str] = {
    "dma-error": "the DMA engine's N-th memory access answers SLVERR (its transfer fails)",
    "bus-error": "the compute engine's N-th memory access answers SLVERR (`:decerr`: DECERR)",
    "drop-irq": "the compute engine's N-th interrupt never reaches the host",
    "delay-irq": "the compute engine's N-th interrupt arrives CYCLES late (`delay-irq:CYCLES`)",
    "spurious-irq": "the interrupt line rises with no event behind it (`:CYCLES` long)",
    "stuck-busy": "the DMA engine's N-th memory access never completes, until the driver aborts"
    " (`:engine`: the compute engine's; its watchdog ends it)",
    "bitflip": "the top bit flips in the first byte of the first input's device copy "
    "(`bitflip:MEMORY:ADDR:BIT`: in the byte at ADDR when it is read)",
    "reg-value": "a read of a register returns a given value (`reg-value:NAME:VALUE`)",
}
"""Every kind, with what it does (the CLI's help and the docs' table)."""

_UNITS = {"any": 0, "dma": 1, "engine": 2}
_RESPS = {"slverr": 2, "decerr": 3}
_IRQ_SOURCES = {"any": 0, "dma": 1, "engine": 2}
_MEM_MODES = {"error": 1, "stall": 2, "flip": 3}
_IRQ_MODES = {"drop": 1, "delay": 2, "spurious": 3}
_EVERY_ADDRESS = (0, (1 << 64) - 1)
_TRIGGER = re.compile(r"^(?:(?P<n>\d+)|cycle=(?P<cycle>\d+))(?P<every>\+)?$")


@dataclass(frozen=True)
class Fault:
    """One fault, parsed (`parse_fault`); `FaultController.inject` arms it.

    Attributes:
        spec: The text it was parsed from (how lists and errors name it).
        kind: One of `FAULT_KINDS`.
        family: ``"mem"``, ``"irq"`` or ``"reg"``: the controller's part it arms (one
            fault per family at a time: arming one replaces the family's last).
        nth: The event it fires on first (1: the next one).
        arm_cycles: Cycles after the injection before events count (``@cycle=C``).
        every: Fires on every event from the first on, not once.
        mode: The family's mode name (``"error"``, ``"stall"``, ``"flip"``, ``"drop"``, ...).
        memory: The memory whose range counts (None: every address, or `base`/`size`).
        base: First byte of the range (memory faults), when given as an address.
        size: Bytes of the range, with `base`.
        unit: Whose accesses count: ``"any"``, ``"dma"`` or ``"engine"``.
        resp: ``"slverr"`` or ``"decerr"``.
        reads: Read bursts count.
        writes: Write bursts count.
        bit: The bit flipped (``bitflip``).
        source: Whose interrupts count (``"engine"``, ``"dma"``, ``"any"``).
        cycles: Delay or pulse length of an interrupt fault.
        register: The register's name (``reg-value``), as given.
        value: The value a faulted register read returns.
    """

    spec: str
    kind: str
    family: str
    nth: int = 1
    arm_cycles: int = 0
    every: bool = False
    mode: str = ""
    memory: str | None = None
    base: int | None = None
    size: int | None = None
    unit: str = "any"
    resp: str = "slverr"
    reads: bool = True
    writes: bool = True
    bit: int = 0
    source: str = "engine"
    cycles: int = 16
    register: str = ""
    value: int = 0


@dataclass(frozen=True)
class FaultStatus:
    """An armed fault and how often it fired (`FaultController.status`)."""

    fault: Fault
    hits: int

    def describe(self) -> str:
        return f"{self.fault.spec}: fired {self.hits} time(s)"


def _bad(spec: str, why: str) -> XrtError:
    kinds = ", ".join(FAULT_KINDS)
    return XrtError(ErrorCode.OUT_OF_RANGE, f"fault {spec!r}: {why} (kinds: {kinds})")


def _number(spec: str, text: str, what: str, limit: int = 1 << 64) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise _bad(spec, f"{what} {text!r} is not a number") from None
    if not 0 <= value < limit:
        raise _bad(spec, f"{what} {value} is out of range [0, {limit})")
    return value


def parse_fault(spec: str) -> Fault:
    """Parse ``KIND[:ARG...][@TRIGGER]`` (module docstring); XrtError 11003 names what is
    wrong in it."""
    if not isinstance(spec, str):
        raise XrtError(ErrorCode.WRONG_TYPE, f"a fault is a string, not {type(spec).__name__}")
    text = spec.strip()
    body, _, trigger = text.partition("@")
    kind, *args = body.split(":")
    if kind not in FAULT_KINDS:
        raise _bad(spec, f"unknown kind {kind!r}")
    nth, arm, every = 1, 0, False
    if trigger:
        m = _TRIGGER.match(trigger)
        if m is None:
            raise _bad(spec, f"trigger {trigger!r} is neither N nor cycle=C (either with +)")
        every = bool(m["every"])
        if m["n"] is not None:
            nth = _number(spec, m["n"], "the event number", 1 << 32)
            if nth < 1:
                raise _bad(spec, "events count from 1")
        else:
            arm = _number(spec, m["cycle"], "the cycle", 1 << 32)
    common = {"spec": text, "kind": kind, "nth": nth, "arm_cycles": arm, "every": every}
    if kind in ("dma-error", "bus-error", "stuck-busy"):
        return _memory_fault(spec, kind, args, common)
    if kind == "bitflip":
        return _bitflip(spec, args, common)
    if kind in ("drop-irq", "delay-irq", "spurious-irq"):
        return _irq_fault(spec, kind, args, common)
    if len(args) != 2:
        raise _bad(spec, "reg-value takes a register and a value: reg-value:NAME:VALUE")
    value = _number(spec, args[1], "the value", 1 << 32)
    return Fault(family="reg", mode="on", register=args[0], value=value, **common)  # type: ignore[arg-type]


def _memory_fault(spec: str, kind: str, args: list[str], common: dict) -> Fault:
    unit = {"dma-error": "dma", "bus-error": "engine", "stuck-busy": "dma"}[kind]
    resp, memory, base, size = "slverr", None, None, None
    for arg in args:
        low = arg.lower()
        if low in _RESPS and kind != "stuck-busy":
            resp = low
        elif low in _UNITS:
            unit = low
        elif re.fullmatch(r"[a-z][a-z0-9_]*", low):
            memory = low
        else:
            start, plus, length = arg.partition("+")
            base = _number(spec, start, "the address")
            size = _number(spec, length, "the size") if plus else 1
            if size == 0:
                raise _bad(spec, "a range of 0 bytes")
    mode = "stall" if kind == "stuck-busy" else "error"
    return Fault(
        family="mem",
        mode=mode,
        unit=unit,
        resp=resp,
        memory=memory,
        base=base,
        size=size,
        **common,
    )


def _bitflip(spec: str, args: list[str], common: dict) -> Fault:
    if not args:  # the first input's device copy: the DMA's first read of udma (docs)
        return Fault(
            family="mem", mode="flip", unit="dma", memory="udma", bit=7, writes=False, **common
        )
    if len(args) != 3:
        raise _bad(spec, "bitflip takes no argument or MEMORY:ADDR:BIT")
    return Fault(
        family="mem",
        mode="flip",
        memory=args[0].lower(),
        base=_number(spec, args[1], "the address"),
        size=1,
        bit=_number(spec, args[2], "the bit", 8),
        writes=False,
        **common,
    )


def _irq_fault(spec: str, kind: str, args: list[str], common: dict) -> Fault:
    mode = kind.removesuffix("-irq")
    source, cycles = ("any", 16) if mode == "spurious" else ("engine", 0)
    for arg in args:
        if arg.lower() in _IRQ_SOURCES:
            source = arg.lower()
        else:
            cycles = _number(spec, arg, "the cycles", 1 << 32)
    if mode == "delay" and cycles == 0:
        raise _bad(spec, "delay-irq takes the delay in cycles: delay-irq:CYCLES")
    if mode == "spurious" and cycles == 0:
        raise _bad(spec, "a spurious interrupt lasts at least one cycle")
    return Fault(family="irq", mode=mode, source=source, cycles=cycles, **common)


class FaultController:
    """The fault controller of one simulated device, through its ``fault`` register region.

    Args:
        region: The device's ``fault`` register region.
        target: The device's target (memory ranges, register block bases).
    """

    def __init__(self, region: RegRegion, target: TargetConfig) -> None:
        self._region = region
        self._target = target
        self._armed: dict[str, Fault] = {}

    def _reg(self, name: str) -> int:
        return self._region.base + FAULT.offset(name)

    def _write(self, values: list[tuple[str, int]]) -> None:
        self._region.execute([RegWrite(self._reg(n), v & 0xFFFF_FFFF) for n, v in values])

    def _range(self, fault: Fault) -> tuple[int, int]:
        if fault.base is not None:
            return fault.base, fault.size or 1
        if fault.memory is None:
            return _EVERY_ADDRESS
        if not self._target.has_memory(fault.memory):
            known = ", ".join(m.name for m in self._target.memories)
            raise _bad(fault.spec, f"{self._target.name} has no memory {fault.memory!r} ({known})")
        m = self._target.memory(fault.memory)
        return m.base, m.size

    def _register_address(self, fault: Fault) -> int:
        name = fault.register
        block, _, reg = name.rpartition(".")
        blocks = {"npu": (NPU, self._target.npu_base), "dma": (DMA, self._target.dma_base)}
        if block:
            if block.lower() not in blocks:
                raise _bad(fault.spec, f"no register block {block!r} (npu, dma)")
            candidates = [blocks[block.lower()]]
        else:
            candidates = list(blocks.values())
        for info, base in candidates:
            if reg.upper() in info:
                return base + info.offset(reg.upper())
        raise _bad(fault.spec, f"no register {name!r} in the npu or dma block")

    def _trigger(self, prefix: str, fault: Fault) -> list[tuple[str, int]]:
        return [
            (f"{prefix}_SKIP", fault.nth - 1),
            (f"{prefix}_COUNT", 0 if fault.every else 1),
            (f"{prefix}_ARM_DELAY", fault.arm_cycles),
        ]

    def inject(self, fault: Fault | str) -> Fault:
        """Arm `fault` (a `Fault` or its text), replacing the last fault of its family;
        returns it parsed."""
        f = parse_fault(fault) if isinstance(fault, str) else fault
        if f.family == "mem":
            base, size = self._range(f)
            mode = (
                _MEM_MODES[f.mode]
                | _RESPS[f.resp] << 2
                | _UNITS[f.unit] << 4
                | int(f.reads) << 6
                | int(f.writes) << 7
                | f.bit << 8
            )
            self._write(
                [
                    ("MEM_BASE_LO", base),
                    ("MEM_BASE_HI", base >> 32),
                    ("MEM_SIZE_LO", size),
                    ("MEM_SIZE_HI", size >> 32),
                    *self._trigger("MEM", f),
                    ("MEM_MODE", mode),  # last: the MODE write arms it
                ]
            )
        elif f.family == "irq":
            mode = _IRQ_MODES[f.mode] | _IRQ_SOURCES[f.source] << 2
            self._write([("IRQ_CYCLES", f.cycles), *self._trigger("IRQ", f), ("IRQ_MODE", mode)])
        else:
            address = self._register_address(f)
            self._write(
                [
                    ("REG_ADDR", address),
                    ("REG_VALUE", f.value),
                    *self._trigger("REG", f),
                    ("REG_MODE", 1),
                ]
            )
        self._armed[f.family] = f
        return f

    def status(self) -> list[FaultStatus]:
        """The faults armed through this controller, each with how often it fired."""
        if not self._armed:
            return []
        names = {"mem": "MEM_HITS", "irq": "IRQ_HITS", "reg": "REG_HITS"}
        hits = self._region.execute([RegRead(self._reg(names[f])) for f in self._armed])
        return [FaultStatus(f, h or 0) for f, h in zip(self._armed.values(), hits, strict=True)]

    def clear(self) -> None:
        """Disarm every fault (a stalled burst goes on: the MODE write is a register write)."""
        self._write([("MEM_MODE", 0), ("IRQ_MODE", 0), ("REG_MODE", 0)])
        self._armed.clear()
