"""The compute engine's launch sequence (docs/isa.md "Launching a program") over the harness.

`launch_ops` is the one batch of register writes a driver issues per launch: program
address and length, the base registers, interrupt clear/enable and START. `run_program`
issues it, waits for the interrupt and reads the outcome and the counters. The register
offsets come from the generated register map.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from npuemu.sim.harness import NpuHarness, RegOp, RegOpKind, WaitOutcome
from xrt._generated.regmap_npu import NPU

__all__ = ["PERF_COUNTERS", "CoreResult", "launch_ops", "run_program"]

_R = {r.name: r.offset for r in NPU.registers}
_STATUS = NPU.register("CORE_STATUS")
_CORE_EVENTS = 0b110  # INT_STATUS/INT_ENABLE: CORE_DONE | CORE_ERROR
PERF_COUNTERS = (
    "RUN_CYCLES",
    "LOAD_BUSY",
    "COMPUTE_BUSY",
    "STORE_BUSY",
    "LOAD_TOKEN_WAIT",
    "COMPUTE_TOKEN_WAIT",
    "STORE_TOKEN_WAIT",
    "GEMM_CYCLES",
    "BYTES_READ",
    "BYTES_WRITTEN",
    "LOAD_RETIRED",
    "COMPUTE_RETIRED",
    "STORE_RETIRED",
)


@dataclass(frozen=True)
class CoreResult:
    """Outcome of one program run."""

    status: int  # CORE_STATUS
    err_code: int
    err_unit: int
    err_pc: int
    err_addr: int
    perf: dict[str, int]  # PERF_* counters (64 bits each)
    cycles: int  # simulated cycles from START to the interrupt
    outcome: WaitOutcome

    @property
    def ok(self) -> bool:
        return self.outcome is WaitOutcome.IRQ and self.err_code == 0 and bool(self.status & 2)


def launch_ops(
    npu_base: int, prog_addr: int, prog_insns: int, bases: Mapping[int, int]
) -> list[RegOp]:
    """Register writes that launch a program (one batch): docs/isa.md steps 3 and 4."""

    def w(name: str, value: int) -> RegOp:
        return RegOp(RegOpKind.WRITE, npu_base + _R[name], value & 0xFFFF_FFFF)

    ops = [w("PROG_ADDR_LO", prog_addr), w("PROG_ADDR_HI", prog_addr >> 32)]
    ops.append(w("PROG_INSNS", prog_insns))
    for n, value in sorted(bases.items()):
        ops += [w(f"BASE{n}_LO", value), w(f"BASE{n}_HI", value >> 32)]
    ops += [w("INT_STATUS", _CORE_EVENTS), w("INT_ENABLE", _CORE_EVENTS), w("CORE_CTRL", 1)]
    return ops


async def run_program(
    h: NpuHarness,
    npu_base: int,
    prog_addr: int,
    prog_insns: int,
    bases: Mapping[int, int],
    *,
    max_cycles: int = 50_000_000,
    timeout_s: float | None = 300.0,
) -> CoreResult:
    """Launch, wait for the interrupt, read status, error registers and counters, ack."""
    await h.run_batch(launch_ops(npu_base, prog_addr, prog_insns, bases))
    start = h.cycles
    wait = await h.wait_irq(max_cycles, timeout_s)
    cycles = h.cycles - start
    names = ["CORE_STATUS", "CORE_ERR_PC", "CORE_ERR_ADDR_LO", "CORE_ERR_ADDR_HI"]
    for c in PERF_COUNTERS:
        names += [f"PERF_{c}_LO", f"PERF_{c}_HI"]  # LO first: it latches HI
    values = await h.run_batch([RegOp(RegOpKind.READ, npu_base + _R[n]) for n in names])
    await h.write_reg(npu_base + _R["INT_STATUS"], _CORE_EVENTS)
    v = dict(zip(names, (int(x or 0) for x in values), strict=True))
    status = v["CORE_STATUS"]
    return CoreResult(
        status=status,
        err_code=_STATUS.field("ERR_CODE").extract(status),
        err_unit=_STATUS.field("ERR_UNIT").extract(status),
        err_pc=v["CORE_ERR_PC"],
        err_addr=(v["CORE_ERR_ADDR_HI"] << 32) | v["CORE_ERR_ADDR_LO"],
        perf={c: (v[f"PERF_{c}_HI"] << 32) | v[f"PERF_{c}_LO"] for c in PERF_COUNTERS},
        cycles=cycles,
        outcome=wait.outcome,
    )
