"""GEMM and VEC of the golden model against the spec's pseudo-code (golden_refs.py) on
random instructions (hypothesis: negative, zero and repeating strides, aliasing, every init
mode and VEC function), and against numpy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from golden_refs import naive_gemm, naive_vec
from hypothesis import given, settings
from hypothesis import strategies as st

from xrt.hw.config import MemoryWindow
from xrt.hw.isa import Finish, Gemm, GemmInit, Vec, VecFunc
from xrt.hw.targets import NPU
from xrt.npu.golden import Machine, Memory, run

MEM = MemoryWindow("mem", 0x1000_0000, 1 << 20)
SMALL = dataclasses.replace(
    NPU, block=4, inp_rows=64, wgt_rows=32, acc_rows=64, prm_rows=16, lut_tables=2
)


def _random_state(rng, config):
    mach = Machine(config)
    mach.inp[:] = rng.integers(-128, 128, mach.inp.shape)
    mach.wgt[:] = rng.integers(-128, 128, mach.wgt.shape)
    big = rng.random(mach.acc.shape) < 0.2
    mach.acc[:] = np.where(
        big,
        rng.integers(-(2**31), 2**31, mach.acc.shape),
        rng.integers(-1000, 1000, mach.acc.shape),
    )
    mach.lut[:] = rng.integers(-128, 128, mach.lut.shape)
    return mach


def _loop(draw, rows, names, counts):
    """A start and strides whose extremes stay inside [0, rows)."""
    strides = {n: draw(st.integers(-3, 3)) for n in names}
    lo = sum(min(0, (c - 1) * strides[n]) for n, c in zip(names, counts, strict=True))
    hi = sum(max(0, (c - 1) * strides[n]) for n, c in zip(names, counts, strict=True))
    start = draw(st.integers(-lo, rows - 1 - hi))
    return start, strides


@st.composite
def gemms(draw):
    n0, n1, n2 = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    fields = dict(n0=n0, n1=n1, n2=n2, init=draw(st.sampled_from(list(GemmInit))))
    for op, rows in (("acc", SMALL.acc_rows), ("inp", SMALL.inp_rows), ("wgt", SMALL.wgt_rows)):
        start, strides = _loop(draw, rows, [f"{op}_s2", f"{op}_s1", f"{op}_s0"], [n2, n1, n0])
        fields[op] = start
        fields.update(strides)
    fields["bias"] = draw(st.integers(0, SMALL.acc_rows - 1))
    return Gemm(**fields)


@st.composite
def vecs(draw):
    n0, n1 = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    func = draw(st.sampled_from(list(VecFunc)))
    a_acc = draw(st.booleans()) and func != VecFunc.LUT
    b_acc = draw(st.booleans()) and func != VecFunc.LUT
    fields = dict(
        n0=n0,
        n1=n1,
        func=func,
        a_acc=a_acc,
        b_acc=b_acc,
        ma=draw(st.integers(-(2**15), 2**15 - 1)),
        mb=draw(st.integers(-(2**15), 2**15 - 1)),
    )
    for op, on_acc in (("dst", True), ("a", a_acc), ("b", b_acc)):
        rows = SMALL.acc_rows if on_acc else SMALL.inp_rows
        start, strides = _loop(draw, rows, [f"{op}_s1", f"{op}_s0"], [n1, n0])
        fields[op] = start
        fields.update(strides)
    if func == VecFunc.LUT:
        fields["b"] = draw(st.integers(0, SMALL.lut_tables - 1))
    if func != VecFunc.LUT and draw(st.booleans()):  # pooling: B (or A) is the destination
        side = draw(st.sampled_from(["a", "b"]))
        fields[f"{side}_acc"] = True
        fields[side] = fields["dst"]
        fields[f"{side}_s0"], fields[f"{side}_s1"] = fields["dst_s0"], fields["dst_s1"]
    return Vec(**fields)


@settings(max_examples=150, deadline=None)
@given(gemms(), st.integers(0, 2**32 - 1))
def test_gemm_matches_the_spec_pseudo_code(insn, seed):
    mach = _random_state(np.random.default_rng(seed), SMALL)
    want = naive_gemm(insn, mach.inp, mach.wgt, mach.acc)
    res = run([insn, Finish()], Memory([MEM]), config=SMALL, machine=mach)
    assert res.ok, res
    np.testing.assert_array_equal(mach.acc, want)


@settings(max_examples=150, deadline=None)
@given(vecs(), st.integers(0, 2**32 - 1))
def test_vec_matches_the_spec_pseudo_code(insn, seed):
    mach = _random_state(np.random.default_rng(seed), SMALL)
    want = naive_vec(insn, mach.inp, mach.acc, mach.lut)
    res = run([insn, Finish()], Memory([MEM]), config=SMALL, machine=mach)
    assert res.ok, res
    np.testing.assert_array_equal(mach.acc, want)


@pytest.mark.parametrize("func", list(VecFunc))
def test_every_vec_func_against_numpy(func):
    rng = np.random.default_rng(int(func))
    mach = _random_state(rng, NPU)
    a = mach.acc[0:8].astype(np.int64)
    bi = mach.inp[100:108].astype(np.int64)
    insn = Vec(
        func=func,
        a_acc=func != VecFunc.LUT,
        dst=50,
        a=0 if func != VecFunc.LUT else 100,
        b=100,
        n0=8,
        n1=1,
        dst_s0=1,
        a_s0=1,
        b_s0=1,
        ma=-3,
        mb=7,
    )
    if func == VecFunc.LUT:
        insn = insn.replace(b=2)
    res = run([insn, Finish()], Memory([MEM]), machine=mach)
    assert res.ok, res
    table = mach.lut.reshape(-1).astype(np.int64)
    want = {
        VecFunc.MOV: a,
        VecFunc.ADD: a + bi,
        VecFunc.MUL: a * bi,
        VecFunc.MAX: np.maximum(a, bi),
        VecFunc.MIN: np.minimum(a, bi),
        VecFunc.QADD: a * -3 + bi * 7,
        VecFunc.LUT: table[512 + bi + 128],
    }[func]
    np.testing.assert_array_equal(mach.acc[50:58], want.astype(np.int64).astype(np.int32))


def test_gemm_first_pass_restarts_rows_it_revisits():
    """init applies to every iteration with i2 == 0: a row visited twice in that pass
    keeps only the last product; the second pass accumulates."""
    mach = Machine(SMALL)
    mach.inp[0] = [1, 2, 3, 4]
    mach.inp[1] = [10, 0, 0, 0]
    mach.wgt[0] = np.eye(4, dtype=np.int8)
    mach.acc[5] = [100, 100, 100, 100]
    insn = Gemm(init=GemmInit.ZERO, acc=7, inp=0, wgt=0, n0=2, n1=1, n2=2, inp_s0=1)
    res = run([insn, Finish()], Memory([MEM]), config=SMALL, machine=mach)
    assert res.ok
    # pass 0: acc = x0 then acc = x1 (restart); pass 1: += x0, += x1
    np.testing.assert_array_equal(mach.acc[7], [21, 2, 3, 4])
    bias = Gemm(init=GemmInit.BIAS, acc=5, bias=5, inp=0, wgt=0, n0=2, n1=1, n2=1, inp_s0=1)
    run([bias, Finish()], Memory([MEM]), config=SMALL, machine=mach)  # bias row is the target
    np.testing.assert_array_equal(mach.acc[5], [111, 102, 103, 104])


def test_gemm_wraps_int32():
    mach = Machine(SMALL)
    mach.inp[0] = [127, 127, 127, 127]
    mach.wgt[0] = 127
    mach.acc[0] = 2**31 - 1
    res = run([Gemm(acc=0, n0=1, n1=1, n2=1), Finish()], Memory([MEM]), config=SMALL, machine=mach)
    assert res.ok
    assert mach.acc[0, 0] == (2**31 - 1 + 4 * 127 * 127) - 2**32
