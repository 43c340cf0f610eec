"""Independent references for the golden model's tests: the spec's pseudo-code, literally.

These loop per iteration and per lane in plain Python (slow, obviously correct); the tests
compare the golden model's vectorised execution against them on small buffers.
"""

from __future__ import annotations

import numpy as np

from xrt.hw.isa import Gemm, GemmInit, Vec, VecFunc


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def naive_gemm(insn: Gemm, inp: np.ndarray, wgt: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """docs/isa.md GEMM semantics; returns the new ACC."""
    acc = acc.astype(np.int64).copy()
    b = inp.shape[1]
    for i2 in range(insn.n2):
        for i1 in range(insn.n1):
            for i0 in range(insn.n0):
                a = insn.acc + i2 * insn.acc_s2 + i1 * insn.acc_s1 + i0 * insn.acc_s0
                x = insn.inp + i2 * insn.inp_s2 + i1 * insn.inp_s1 + i0 * insn.inp_s0
                w = insn.wgt + i2 * insn.wgt_s2 + i1 * insn.wgt_s1 + i0 * insn.wgt_s0
                if i2 == 0 and insn.init == GemmInit.ZERO:
                    start = [0] * b
                elif i2 == 0 and insn.init == GemmInit.BIAS:
                    start = [int(v) for v in acc[insn.bias]]
                else:
                    start = [int(v) for v in acc[a]]
                for o in range(b):
                    s = sum(int(inp[x][i]) * int(wgt[w][o][i]) for i in range(b))
                    acc[a][o] = wrap32(start[o] + s)
    return acc.astype(np.int32)


def naive_vec(insn: Vec, inp: np.ndarray, acc: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """docs/isa.md VEC semantics; returns the new ACC."""
    acc = acc.astype(np.int64).copy()
    table = lut.reshape(-1)
    b = acc.shape[1]
    for i1 in range(insn.n1):
        for i0 in range(insn.n0):
            d = insn.dst + i1 * insn.dst_s1 + i0 * insn.dst_s0
            ra = insn.a + i1 * insn.a_s1 + i0 * insn.a_s0
            rb = insn.b + i1 * insn.b_s1 + i0 * insn.b_s0
            av = [int(v) for v in (acc[ra] if insn.a_acc else inp[ra])]
            reads_b = insn.func not in (VecFunc.MOV, VecFunc.LUT)
            bv = [int(v) for v in (acc[rb] if insn.b_acc else inp[rb])] if reads_b else [0] * b
            out = []
            for lane in range(b):
                x, y = av[lane], bv[lane]
                f = insn.func
                if f == VecFunc.MOV:
                    r = x
                elif f == VecFunc.ADD:
                    r = x + y
                elif f == VecFunc.MUL:
                    r = x * y
                elif f == VecFunc.MAX:
                    r = max(x, y)
                elif f == VecFunc.MIN:
                    r = min(x, y)
                elif f == VecFunc.QADD:
                    r = x * insn.ma + y * insn.mb
                else:
                    r = int(table[insn.b * 256 + x + 128])
                out.append(wrap32(r))
            acc[d] = out
    return acc.astype(np.int32)


def naive_requantize(acc: int, m: int, s: int, lo: int, hi: int) -> int:
    """docs/quantization.md 5.2 with Python integers (any S)."""
    p = acc * m
    y = (p + (1 << (s - 1))) >> s if s > 0 else p
    return min(max(y, lo), hi)
