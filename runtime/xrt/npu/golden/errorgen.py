"""Programs with exactly one error, one or more per error code the golden model produces.

Each `ErrorCase` is a short legal prefix (a random race-free program without its FINISH,
tokens drained), then the faulty instruction (or fault condition), then FINISH, together
with the memories, base registers, bus faults and the expected (code, pc, unit). The RTL
tests launch the same case and compare STATUS with it; the golden model's tests check that
`run` reports exactly the expected triple.

ABORTED is not produced (it needs CTRL.ABORT from outside, not a program).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xrt.hw.config import MemoryWindow, NpuConfig
from xrt.hw.isa import (
    INSN_BYTES,
    Buffer,
    EngineError,
    Finish,
    Gemm,
    Instruction,
    Load,
    Store,
    Sync,
    Unit,
    Vec,
    VecFunc,
    encode_program,
)

from .generator import GeneratedProgram, generate_program
from .memory import BusFault, Memory

__all__ = ["ErrorCase", "error_cases"]


@dataclass
class ErrorCase:
    """One program with one error and what the engine must report.

    Attributes:
        name: What is wrong.
        program: The program's bytes (possibly malformed).
        prog_addr: Where the program is placed (PROG_ADDR).
        prog_insns: PROG_INSNS.
        bases: BASE register values.
        windows: The memory windows.
        init: ``(address, bytes)`` written before the launch (data; the program itself is
            written at prog_addr by `memory`).
        faults: Bus faults to inject.
        config: Engine sizes.
        expect: (error code, error pc, unit or None for fetch/decode and FINISH).
        retired: Instructions retired before the error, when that is not the error pc
            (an error found while an earlier instruction waits for a token).
    """

    name: str
    program: bytes
    prog_addr: int
    prog_insns: int
    bases: list[int]
    windows: tuple[MemoryWindow, ...]
    init: list[tuple[int, bytes]]
    config: NpuConfig
    expect: tuple[EngineError, int, Unit | None]
    faults: list[BusFault] = field(default_factory=list)
    retired: int | None = None

    def memory(self) -> Memory:
        """Memories with the data, the program (where it fits a window) and the faults."""
        mem = Memory(self.windows)
        for addr, data in self.init:
            mem.write(addr, data)
        for i in range(self.prog_insns):
            addr = self.prog_addr + i * INSN_BYTES
            if mem.window_of(addr, INSN_BYTES) is not None and (i + 1) * INSN_BYTES <= len(
                self.program
            ):
                mem.write(addr, self.program[i * INSN_BYTES : (i + 1) * INSN_BYTES])
        mem.faults.extend(self.faults)
        return mem


def _prefix(
    seed: int, config: NpuConfig | None, windows: Sequence[MemoryWindow] | None
) -> GeneratedProgram:
    gp = generate_program(seed, config=config, windows=windows, length=12, region_bytes=4096)
    gp.program = gp.program[:-1]  # drop FINISH: the prefix ends with every token drained
    return gp


def error_cases(
    seed: int = 0,
    config: NpuConfig | None = None,
    windows: Sequence[MemoryWindow] | None = None,
) -> list[ErrorCase]:
    """One case per way the golden model reports each error code (ABORTED excepted)."""
    gp = _prefix(seed, config, windows)
    cfg, regions, pre = gp.config, gp.regions, gp.program
    blk = cfg.block
    n = len(pre)
    act, out = regions["act"], regions["out"]
    win0 = next(w for w in gp.windows if w.contains(act.addr))
    prog_win = gp.windows[-1]
    prog_addr = prog_win.base + prog_win.size // 2  # past the data regions of small windows
    prog_addr -= prog_addr % INSN_BYTES
    cases: list[ErrorCase] = []
    good_load = Load(buffer=Buffer.INP, base=act.reg, x_size=2, y_size=1, z_size=1, x_stride=blk)
    good_store = Store(
        base=out.reg, x_size=2, y_size=1, z_size=1, x_stride=blk, sram_x_stride=1, lo=-128, hi=127
    )

    def add(
        name: str,
        tail: Sequence[Instruction] | bytes,
        expect: tuple[EngineError, int, Unit | None],
        *,
        finish: bool = True,
        faults: Sequence[BusFault] = (),
        at: int | None = None,
        bases: list[int] | None = None,
        retired: int | None = None,
    ) -> None:
        blob = encode_program(pre) + (tail if isinstance(tail, bytes) else encode_program(tail))
        if finish:
            blob += Finish().encode()
        cases.append(
            ErrorCase(
                name,
                blob,
                prog_addr if at is None else at,
                len(blob) // INSN_BYTES,
                list(bases or gp.bases),
                gp.windows,
                gp.init,
                cfg,
                expect,
                list(faults),
                retired,
            )
        )

    ill = EngineError.ILLEGAL_INSTRUCTION
    # Decode errors (the fetch unit: unit None).
    add("undefined opcode 0", bytes(INSN_BYTES), (ill, n, None))
    add("undefined opcode 15", (15).to_bytes(INSN_BYTES, "little"), (ill, n, None))
    add(
        "reserved bit set",
        (Finish().to_word() | 1 << 255).to_bytes(INSN_BYTES, "little"),
        (ill, n, None),
    )
    add(
        "undefined Buffer 7",
        (good_load.to_word() | 7 << 8).to_bytes(INSN_BYTES, "little"),
        (ill, n, None),
    )
    add("no FINISH before PROG_INSNS", [good_load], (ill, n + 1, None), finish=False)
    add("FINISH with a token flag", [Finish(pop_prev=True)], (ill, n, None), finish=False)
    # Checks of the unit.
    add("count of 0", [good_load.replace(y_size=0)], (ill, n, Unit.LOAD))
    add("LOAD pop_prev", [good_load.replace(pop_prev=True)], (ill, n, Unit.LOAD))
    add("STORE push_next", [good_store.replace(push_next=True)], (ill, n, Unit.STORE))
    add("SYNC STORE pop_next", [Sync(unit=Unit.STORE, pop_next=True)], (ill, n, Unit.STORE))
    add(
        "padding on a WGT load",
        [
            Load(
                buffer=Buffer.WGT, base=regions["wgt"].reg, x_size=1, y_size=1, z_size=1, pad_left=1
            )
        ],
        (ill, n, Unit.LOAD),
    )
    add("lo > hi", [good_store.replace(lo=5, hi=4)], (ill, n, Unit.STORE))
    add("shift 47", [good_store.replace(shift=47)], (ill, n, Unit.STORE))
    add("shift with use_prm", [good_store.replace(use_prm=True, shift=3)], (ill, n, Unit.STORE))
    add("LUT from ACC", [Vec(func=VecFunc.LUT, a_acc=True, n0=1, n1=1)], (ill, n, Unit.COMPUTE))
    # Ranges and alignment.
    add(
        "misaligned offset",
        [good_load.replace(offset=blk // 2)],
        (EngineError.MISALIGNED, n, Unit.LOAD),
    )
    add(
        "misaligned stride",
        [good_store.replace(y_size=2, y_stride=blk + 4)],
        (EngineError.MISALIGNED, n, Unit.STORE),
    )
    past = win0.end - act.addr - blk  # the second element lies past the window's end
    add(
        "LOAD past a window",
        [good_load.replace(offset=past)],
        (EngineError.ADDR_RANGE, n, Unit.LOAD),
    )
    spare = next(r for r in range(cfg.base_regs) if r not in {g.reg for g in regions.values()})
    add(
        "STORE below every window",
        [good_store.replace(base=spare)],
        (EngineError.ADDR_RANGE, n, Unit.STORE),
        bases=_with(gp.bases, spare, 0),
    )
    add(
        "LOAD past INP rows",
        [good_load.replace(sram=cfg.inp_rows - 1)],
        (EngineError.BUFFER_RANGE, n, Unit.LOAD),
    )
    add(
        "GEMM acc row past ACC",
        [Gemm(acc=cfg.acc_rows - 2, n0=3, n1=1, n2=1, acc_s0=1)],
        (EngineError.BUFFER_RANGE, n, Unit.COMPUTE),
    )
    add(
        "GEMM negative inp row",
        [Gemm(inp=1, n0=1, n1=1, n2=2, inp_s2=-2)],
        (EngineError.BUFFER_RANGE, n, Unit.COMPUTE),
    )
    add(
        "VEC LUT table past LUT",
        [Vec(func=VecFunc.LUT, b=cfg.lut_tables, n0=1, n1=1)],
        (EngineError.BUFFER_RANGE, n, Unit.COMPUTE),
    )
    add(
        "STORE PRM rows past PRM",
        [good_store.replace(use_prm=True, m_or_prm=cfg.prm_rows - 1, z_size=2, z_stride=2 * blk)],
        (EngineError.BUFFER_RANGE, n, Unit.STORE),
    )
    # Tokens.
    depth = cfg.token_depth
    # The prefix's L2C tokens are drained in program order, not yet in time: the load unit
    # first waits (C2L) until the compute unit is past the prefix's pops, so the engine
    # overflows at the same push in every interleaving.
    add(
        "token overflow",
        [
            Sync(unit=Unit.COMPUTE, push_prev=True),
            Sync(unit=Unit.LOAD, pop_next=True),
            *[Sync(unit=Unit.LOAD, push_next=True)] * (depth + 1),
        ],
        (EngineError.TOKEN_OVERFLOW, n + 2 + depth, Unit.LOAD),
    )
    add(
        "pop whose push never comes",
        [Sync(unit=Unit.COMPUTE, pop_prev=True)],
        (EngineError.WATCHDOG, n, Unit.COMPUTE),
    )
    # Error order while a unit waits for a token that never comes (decode checks first).
    bad_gemm = Gemm(acc=cfg.acc_rows - 2, n0=3, n1=1, n2=1, acc_s0=1)
    wait = Sync(unit=Unit.COMPUTE, pop_prev=True)
    add(
        "a check fails on the instruction that waits",
        [bad_gemm.replace(pop_prev=True)],
        (EngineError.BUFFER_RANGE, n, Unit.COMPUTE),
    )
    add(
        "a check fails in another unit behind the wait",
        [wait, good_load.replace(y_size=0)],
        (ill, n + 1, Unit.LOAD),
        retired=n,
    )
    qd = cfg.insn_queue_depth
    add(
        "a check fails as the waiting unit's queue fills",
        [wait, *[Sync(unit=Unit.COMPUTE)] * qd, bad_gemm],
        (EngineError.BUFFER_RANGE, n + qd + 1, Unit.COMPUTE),
        retired=n,
    )
    add(
        "a check fails past the waiting unit's full queue",
        [wait, *[Sync(unit=Unit.COMPUTE)] * (qd + 1), bad_gemm],
        (EngineError.WATCHDOG, n, Unit.COMPUTE),
    )
    add(
        "two units wait: the watchdog names the lower one",
        [Sync(unit=Unit.STORE, pop_prev=True), Sync(unit=Unit.LOAD, pop_next=True)],
        (EngineError.WATCHDOG, n + 1, Unit.LOAD),
        retired=n,
    )
    add(
        "PROG_ADDR not 32-byte aligned",
        [good_load],
        (EngineError.MISALIGNED, 0, None),
        at=prog_addr + blk,
    )
    # Bus faults.
    for kind in ("SLVERR", "DECERR"):
        add(
            f"LOAD {kind}",
            [good_load],
            (EngineError[f"LOAD_{kind}"], n, Unit.LOAD),
            faults=[BusFault(act.addr + blk, blk, kind)],
        )
        add(
            f"STORE {kind}",
            [good_store],
            (EngineError[f"STORE_{kind}"], n, Unit.STORE),
            faults=[BusFault(out.addr, blk, kind)],
        )
        add(
            f"fetch {kind}",
            [good_load],
            (EngineError[f"FETCH_{kind}"], n, None),
            faults=[BusFault(prog_addr + n * INSN_BYTES + 4, 4, kind)],
        )
    end = prog_win.end - (n + 1) * INSN_BYTES  # instruction n + 1 lies past the window
    add(
        "fetch past every memory",
        [good_load, good_load],
        (EngineError.FETCH_DECERR, n + 1, None),
        at=end,
    )
    return cases


def _with(values: list[int], index: int, value: int) -> list[int]:
    out = list(values)
    out[index] = value
    return out
