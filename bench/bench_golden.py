"""Speed of the golden model (xrt.npu.golden), measured in one run.

- `check` and `run` on a pipelined program of about 100k instructions (LOAD a tile,
  three GEMM taps, STORE; double buffered with tokens both ways), in instructions/s;
- `run` of one large GEMM (64 x 16 x 64 iterations), in model MACs per wall second;
- `generate_program` (150 instructions, the RTL tests' size), programs per second.

Medians over --repeat runs. Usage: python bench/bench_golden.py [--repeat 3] [--tiles 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from xrt.hw.isa import Buffer, Finish, Gemm, GemmInit, Load, Store, Sync, Unit
from xrt.hw.targets import NPU, target
from xrt.npu.golden import Machine, Memory, check, generate_program, run

B = 16


def pipeline(tiles: int) -> list:
    """Per tile: LOAD 18 rows, 3 GEMMs (taps) into 16 ACC rows, STORE 16 rows."""
    prog = []
    for t in range(tiles):
        slot = t % 2
        prog.append(
            Load(
                buffer=Buffer.INP,
                base=1,
                offset=t * 16 * B,
                sram=slot * 32,
                x_size=16,
                y_size=1,
                z_size=1,
                x_stride=B,
                pad_left=1,
                pad_right=1,
                pop_next=t >= 2,
                push_next=True,
            )
        )
        for tap in range(3):
            prog.append(
                Gemm(
                    init=GemmInit.ZERO if tap == 0 else GemmInit.ACC,
                    acc=slot * 16,
                    inp=slot * 32 + tap,
                    wgt=tap,
                    n0=16,
                    n1=1,
                    n2=1,
                    acc_s0=1,
                    inp_s0=1,
                    pop_prev=tap == 0,
                    pop_next=tap == 0 and t >= 2,
                    push_prev=tap == 2,
                    push_next=tap == 2,
                )
            )
        prog.append(
            Store(
                base=2,
                offset=t * 16 * B,
                sram=slot * 16,
                x_size=16,
                y_size=1,
                z_size=1,
                x_stride=B,
                sram_x_stride=1,
                m_or_prm=1 << 14,
                shift=15,
                lo=-128,
                hi=127,
                pop_prev=True,
                push_prev=True,
            )
        )
    prog += [Sync(unit=Unit.LOAD, pop_next=True)] * 2 + [Sync(unit=Unit.COMPUTE, pop_next=True)] * 2
    return [*prog, Finish()]


def median_time(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tiles", type=int, default=20000)
    args = ap.parse_args()
    plddr = target("buyi").memory("plddr")
    bases = {1: plddr.base, 2: plddr.base + 0x1000_0000}
    prog = pipeline(args.tiles)
    n = len(prog)

    t_check, report = median_time(lambda: check(prog, bases, "buyi"), args.repeat)
    assert report.ok and not report.findings, str(report)[:500]
    print(f"check, {n} instructions: {t_check:.2f} s median ({n / t_check:,.0f} insns/s)")

    def run_once():
        return run(prog, Memory.for_target("buyi"), bases)

    t_run, res = median_time(run_once, args.repeat)
    assert res.ok, res
    print(
        f"run,   {n} instructions: {t_run:.2f} s median ({n / t_run:,.0f} insns/s); "
        f"estimate {res.cycles.total:,} cycles, MAC utilisation {res.cycles.mac_utilisation:.1%}"
    )

    mach = Machine(NPU)
    rng = np.random.default_rng(0)
    mach.inp[:] = rng.integers(-128, 128, mach.inp.shape)
    mach.wgt[:] = rng.integers(-128, 128, mach.wgt.shape)
    big = Gemm(
        init=GemmInit.ZERO,
        acc=0,
        inp=0,
        wgt=0,
        n0=64,
        n1=16,
        n2=64,
        acc_s0=1,
        inp_s0=1,
        acc_s1=64,
        inp_s1=64,
        wgt_s1=1,
        inp_s2=1,
        wgt_s2=16,
    )
    t_gemm, res = median_time(lambda: run([big, Finish()], Memory([]), machine=mach), args.repeat)
    assert res.ok, res
    print(
        f"run,   one GEMM of {res.macs:,} MACs: {t_gemm * 1e3:.0f} ms median "
        f"({res.macs / t_gemm / 1e6:,.0f} M model MACs/s)"
    )

    t_gen, _ = median_time(lambda: generate_program(1), args.repeat)
    print(f"generate_program (150 instructions): {t_gen * 1e3:.0f} ms median")


if __name__ == "__main__":
    main()
