"""The golden model's executor on hand-written programs, against numpy, `xrt.ops` and the
spec's pseudo-code (golden_refs.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from golden_refs import naive_gemm, naive_requantize, naive_vec
from hypothesis import given, settings
from hypothesis import strategies as st

from xrt._generated.hwconfig import NPU
from xrt.hwconfig import MemoryWindow
from xrt.npu.golden import CostModel, Machine, Memory, Queue, prm_word, run
from xrt.npu.isa import (
    Buffer,
    EngineError,
    Finish,
    Gemm,
    GemmInit,
    Load,
    Store,
    StoreMode,
    Sync,
    Unit,
    Vec,
    VecFunc,
)
from xrt.ops.conv import qconv2d_forward

B = NPU.block
MEM = MemoryWindow("mem", 0x1000_0000, 1 << 20)
SMALL = dataclasses.replace(
    NPU, block=4, inp_rows=64, wgt_rows=32, acc_rows=64, prm_rows=16, lut_tables=2
)


def memory() -> Memory:
    return Memory([MEM])


def test_gemm_equals_a_matmul():
    """X (M x K) times W^T (K x N) through LOAD, GEMM (K over the outer loop), INT32 STORE."""
    rng = np.random.default_rng(1)
    m_rows, kb, nb = 7, 3, 2
    x = rng.integers(-128, 128, (m_rows, kb * B), dtype=np.int8)
    w = rng.integers(-128, 128, (nb * B, kb * B), dtype=np.int8)
    mem = memory()
    # INP row ib*M + m holds x[m, ib*B:(ib+1)*B]; WGT row ob*KB + ib holds block (ob, ib).
    mem.write(MEM.base, x.reshape(m_rows, kb, B).transpose(1, 0, 2).copy())
    blocks = w.reshape(nb, B, kb, B).transpose(0, 2, 1, 3).copy()  # [ob, ib, o, i]
    mem.write(MEM.base + 0x10000, blocks)
    prog = [
        Load(buffer=Buffer.INP, base=1, x_size=kb * m_rows, y_size=1, z_size=1, x_stride=B),
        Load(
            buffer=Buffer.WGT,
            base=2,
            x_size=nb * kb,
            y_size=1,
            z_size=1,
            x_stride=B * B,
            push_next=True,
        ),
    ]
    for ob in range(nb):
        prog.append(
            Gemm(
                init=GemmInit.ZERO,
                acc=ob * m_rows,
                inp=0,
                wgt=ob * kb,
                n0=m_rows,
                n1=1,
                n2=kb,
                acc_s0=1,
                inp_s0=1,
                inp_s2=m_rows,
                wgt_s2=1,
                pop_prev=ob == 0,
                push_next=ob == nb - 1,
            )
        )
    prog += [
        Store(
            mode=StoreMode.INT32,
            base=3,
            sram=0,
            x_size=m_rows,
            y_size=nb,
            z_size=1,
            x_stride=4 * B,
            y_stride=4 * B * m_rows,
            sram_x_stride=1,
            sram_y_stride=m_rows,
            pop_prev=True,
        ),
        Finish(),
    ]
    res = run(prog, mem, {1: MEM.base, 2: MEM.base + 0x10000, 3: MEM.base + 0x20000})
    assert res.ok, res
    out = mem.read(MEM.base + 0x20000, 4 * B * m_rows * nb).view("<i4").reshape(nb, m_rows, B)
    got = out.transpose(1, 0, 2).reshape(m_rows, nb * B)
    np.testing.assert_array_equal(got, x.astype(np.int64) @ w.astype(np.int64).T)
    assert res.macs == nb * kb * m_rows * B * B
    assert res.insns == {Unit.LOAD: 2, Unit.COMPUTE: nb, Unit.STORE: 1}
    assert res.bytes_read == x.size + w.size
    assert res.bytes_written == 4 * m_rows * nb * B
    assert res.tokens_left == {q: 0 for q in res.tokens_left}
    assert 0 < res.cycles.mac_utilisation < res.cycles.mac_utilisation_gemm <= 1


def _pack_conv(x, weight, bias, mult, shift):
    """Channel-tiled input, weight blocks (ob, ib, tap), bias ACC rows, PRM rows."""
    ci, h, wd = x.shape
    co, _, kh, kw = weight.shape
    cbi, cbo = -(-ci // B), -(-co // B)
    xt = np.zeros((cbi * B, h, wd), np.int8)
    xt[:ci] = x
    xt = xt.reshape(cbi, B, h, wd).transpose(0, 2, 3, 1).copy()  # (z, y, x, lane)
    wt = np.zeros((cbo * B, cbi * B, kh, kw), np.int8)
    wt[:co, :ci] = weight
    blocks = (
        wt.reshape(cbo, B, cbi, B, kh * kw).transpose(0, 2, 4, 1, 3).copy()
    )  # ob, ib, tap, o, i
    bt = np.zeros(cbo * B, np.int32)
    bt[:co] = bias
    mt = np.zeros(cbo * B, np.int64)
    st_ = np.zeros(cbo * B, np.int64)
    mt[:co], st_[:co] = mult, shift
    return xt, blocks, bt.reshape(cbo, B), prm_word(mt, st_).reshape(cbo, B)


def test_a_conv_tap_loop_equals_qconv2d():
    """3x3 conv, pad 1, 20 -> 20 channels (two channel groups each, with padding lanes)."""
    rng = np.random.default_rng(2)
    ci = co = 20
    h = wd = 5
    x = rng.integers(-128, 128, (ci, h, wd), dtype=np.int8)
    weight = rng.integers(-127, 128, (co, ci, 3, 3), dtype=np.int8)
    bias = rng.integers(-20000, 20000, co, dtype=np.int32)
    mult = rng.integers(2**14, 2**15, co)
    shift = rng.integers(14, 20, co)
    op = SimpleNamespace(
        attrs=dict(strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=1, lo=-100, hi=90)
    )
    params = dict(weight=weight, bias=bias, multiplier=mult, shift=shift)
    (want,) = qconv2d_forward(op, [x[None]], params)

    xt, blocks, bt, prm = _pack_conv(x, weight, bias, mult, shift)
    cbi, cbo = xt.shape[0], bt.shape[0]
    mem = memory()
    addr = {1: MEM.base, 2: MEM.base + 0x10000, 3: MEM.base + 0x40000, 4: MEM.base + 0x50000}
    mem.write(addr[1], xt)
    mem.write(addr[2], blocks)
    mem.write(addr[3], np.concatenate([bt.view(np.uint8).ravel(), prm.view(np.uint8).ravel()]))
    ph, pw = h + 2, wd + 2
    bias_row = 1000
    prog = [
        Load(
            buffer=Buffer.INP,
            base=1,
            x_size=wd,
            y_size=h,
            z_size=cbi,
            x_stride=B,
            y_stride=wd * B,
            z_stride=h * wd * B,
            pad_top=1,
            pad_bottom=1,
            pad_left=1,
            pad_right=1,
        ),
        Load(
            buffer=Buffer.WGT,
            base=2,
            x_size=blocks.shape[0] * cbi * 9,
            y_size=1,
            z_size=1,
            x_stride=B * B,
        ),
        Load(
            buffer=Buffer.PRM,
            base=3,
            offset=bt.nbytes,
            x_size=cbo,
            y_size=1,
            z_size=1,
            x_stride=4 * B,
        ),
        Load(
            buffer=Buffer.ACC,
            base=3,
            sram=bias_row,
            x_size=cbo,
            y_size=1,
            z_size=1,
            x_stride=4 * B,
            push_next=True,
        ),
    ]
    first = True
    for ob in range(cbo):
        for ib in range(cbi):
            for ky in range(3):
                init = GemmInit.BIAS if (ib, ky) == (0, 0) else GemmInit.ACC
                prog.append(
                    Gemm(
                        init=init,
                        acc=ob * h * wd,
                        bias=bias_row + ob,
                        inp=ib * ph * pw + ky * pw,
                        wgt=((ob * cbi + ib) * 9) + ky * 3,
                        n0=wd,
                        acc_s0=1,
                        inp_s0=1,  # output x
                        n1=h,
                        acc_s1=wd,
                        inp_s1=pw,  # output y
                        n2=3,
                        inp_s2=1,
                        wgt_s2=1,  # kx taps revisit the same rows
                        pop_prev=first,
                    )
                )
                first = False
    prog[-1] = prog[-1].replace(push_next=True)
    prog += [
        Store(
            base=4,
            x_size=wd,
            y_size=h,
            z_size=cbo,
            x_stride=B,
            y_stride=wd * B,
            z_stride=h * wd * B,
            sram_x_stride=1,
            sram_y_stride=wd,
            sram_z_stride=h * wd,
            use_prm=True,
            m_or_prm=0,
            lo=-100,
            hi=90,
            pop_prev=True,
        ),
        Finish(),
    ]
    res = run(prog, mem, addr)
    assert res.ok, res
    got = mem.read(addr[4], cbo * h * wd * B).view(np.int8).reshape(cbo, h, wd, B)
    got = got.transpose(0, 3, 1, 2).reshape(cbo * B, h, wd)
    np.testing.assert_array_equal(got[:co], want[0])
    assert not got[co:].any()  # padding output channels stay 0


@pytest.mark.parametrize("pad_min", [False, True])
def test_load_padding_rows(pad_min):
    mem = memory()
    data = np.arange(2 * 3 * 2 * B, dtype=np.uint8).reshape(2, 3, 2, B)  # z, y, x, lane
    mem.write(MEM.base, data)
    load = Load(
        buffer=Buffer.INP,
        base=0,
        sram=5,
        x_size=2,
        y_size=3,
        z_size=2,
        x_stride=B,
        y_stride=2 * B,
        z_stride=6 * B,
        pad_top=1,
        pad_bottom=2,
        pad_left=3,
        pad_right=1,
        pad_min=pad_min,
    )
    res = run([load, Finish()], mem, [MEM.base])
    assert res.ok, res
    pad = -128 if pad_min else 0
    want = np.full((2, 6, 6, B), pad, np.int8)
    want[:, 1:4, 3:5] = data.view(np.int8)
    inp = res.machine.inp
    np.testing.assert_array_equal(inp[5 : 5 + 72].reshape(2, 6, 6, B), want)
    assert not inp[:5].any() and not inp[77:].any()
    assert res.bytes_read == data.size


def _store_case(acc_values, m, s, lo=-128, hi=127, use_prm=False):
    mem = memory()
    mach = Machine(NPU)
    acc = np.zeros((len(acc_values), B), np.int64)
    acc[:, 0] = acc_values
    acc[:, 1:] = np.asarray(acc_values)[:, None]
    mach.acc[: len(acc_values)] = acc.astype(np.int32)
    if use_prm:
        mach.prm[3] = prm_word(m, s)
        store = Store(
            base=0,
            x_size=len(acc_values),
            y_size=1,
            z_size=1,
            x_stride=B,
            sram_x_stride=1,
            use_prm=True,
            m_or_prm=3,
            lo=lo,
            hi=hi,
        )
    else:
        store = Store(
            base=0,
            x_size=len(acc_values),
            y_size=1,
            z_size=1,
            x_stride=B,
            sram_x_stride=1,
            m_or_prm=m & 0xFFFF,
            shift=s,
            lo=lo,
            hi=hi,
        )
    res = run([store, Finish()], mem, [MEM.base], machine=mach)
    assert res.ok, res
    return (
        mem.read(MEM.base, B * len(acc_values))
        .view(np.int8)
        .reshape(-1, B)[:, 0]
        .astype(int)
        .tolist()
    )


ACCS = [5, -5, -1, 1, 3, -3, 0, 2**31 - 1, -(2**31), 1000, -1000, 12345678]


@pytest.mark.parametrize("use_prm", [False, True])
@pytest.mark.parametrize(
    ("m", "s"),
    [
        (1, 1),
        (1, 2),
        (3, 2),
        (16384, 15),
        (32767, 46),
        (-32768, 46),
        (-3, 1),
        (0, 0),
        (0, 17),
        (1, 0),
        (-1, 0),
        (16384, 0),
    ],
)
def test_store_requantizes_as_section_5_2(m, s, use_prm):
    got = _store_case(ACCS, m, s, use_prm=use_prm)
    assert got == [naive_requantize(a, m, s, -128, 127) for a in ACCS]


def test_store_rounding_ties_and_saturation_by_hand():
    # 2.5 -> 3, -2.5 -> -2, -0.5 -> 0 (ties towards +infinity); saturation at lo/hi.
    assert _store_case([5, -5, -1, 1], 1, 1) == [3, -2, 0, 1]
    assert _store_case([1000, -1000, 7], 1, 0, lo=-5, hi=6) == [6, -5, 6]
    assert _store_case([100, -100], 1, 0, lo=0, hi=0) == [0, 0]


def test_prm_shifts_beyond_46_are_exact():
    # S = 47: acc * M = 2**46 gives 1; S >= 48 gives 0 for every int32 acc and int16 M.
    assert _store_case([-(2**31), 2**31 - 1], -32768, 47, use_prm=True) == [1, 0]
    for s in (48, 55, 62, 63):
        assert _store_case([-(2**31), 2**31 - 1, -5], -32768, s, use_prm=True) == [0, 0, 0]


def test_store_int32_and_per_lane_prm():
    mem = memory()
    mach = Machine(NPU)
    rng = np.random.default_rng(3)
    mach.acc[:4] = rng.integers(-(2**31), 2**31, (4, B), dtype=np.int64).astype(np.int32)
    ms = rng.integers(-(2**15), 2**15, (2, B))
    ss = rng.integers(0, 64, (2, B))
    mach.prm[0:2] = prm_word(ms, ss)
    prog = [
        Store(
            mode=StoreMode.INT32,
            base=0,
            x_size=2,
            y_size=2,
            z_size=1,
            x_stride=4 * B,
            y_stride=8 * B,
            sram_x_stride=2,
            sram_y_stride=1,
        ),
        Store(
            base=1,
            x_size=2,
            y_size=1,
            z_size=2,
            x_stride=B,
            z_stride=2 * B,
            sram_x_stride=1,
            sram_z_stride=2,
            use_prm=True,
            lo=-128,
            hi=127,
        ),
        Finish(),
    ]
    res = run(prog, mem, [MEM.base, MEM.base + 0x1000], machine=mach)
    assert res.ok, res
    raw = mem.read(MEM.base, 16 * B).view("<i4").reshape(2, 2, B)
    np.testing.assert_array_equal(raw, mach.acc[[[0, 2], [1, 3]]])
    q = mem.read(MEM.base + 0x1000, 4 * B).view(np.int8).reshape(2, 2, B)
    for z in range(2):
        for xx in range(2):
            want = [
                naive_requantize(
                    int(mach.acc[z * 2 + xx, lane]), int(ms[z, lane]), int(ss[z, lane]), -128, 127
                )
                for lane in range(B)
            ]
            assert q[z, xx].tolist() == want


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


def test_sync_and_tokens_are_counted():
    prog = [
        Sync(unit=Unit.LOAD, push_next=True),
        Sync(unit=Unit.COMPUTE, pop_prev=True, push_next=True),
        Sync(unit=Unit.STORE, pop_prev=True, push_prev=True),
        Finish(),
    ]
    res = run(prog, Memory([MEM]))
    assert res.ok
    assert res.insns == {Unit.LOAD: 1, Unit.COMPUTE: 1, Unit.STORE: 1}
    assert res.tokens_left == {Queue.L2C: 0, Queue.C2L: 0, Queue.C2S: 0, Queue.S2C: 1}


def test_bytes_and_instances_decode_the_same():
    from xrt.npu.isa import encode_program

    prog = [Sync(unit=Unit.LOAD, push_next=True), Sync(unit=Unit.COMPUTE, pop_prev=True), Finish()]
    a = run(prog, Memory([MEM]))
    b = run(encode_program(prog), Memory([MEM]))
    assert (a.error, a.insns, a.cycles.total) == (b.error, b.insns, b.cycles.total)
    assert a.error == EngineError.NONE


def test_the_cost_model_overlaps_units_and_waits_for_tokens():
    cost = CostModel(burst_latency=10, issue_cycles=2, fetch_cycles=2)
    load = Load(buffer=Buffer.INP, base=0, x_size=64, y_size=1, z_size=1, x_stride=B)
    gemm = Gemm(init=GemmInit.ZERO, acc=0, inp=100, n0=50, n1=1, n2=1, acc_s0=1, inp_s0=1)
    # 64 dense INP rows: one 1 KiB burst of 64 beats -> 2 + max(64, 10) + 10 cycles
    assert cost.duration(load, NPU) == 76
    assert cost.duration(gemm, NPU) == 52
    strided = load.replace(x_stride=2 * B)  # 64 one-beat bursts, 8 in flight: 8 waves of 10
    assert cost.duration(strided, NPU) == 2 + max(64, 8 * 10) + 10
    # Independent: LOAD and GEMM overlap. Dependent (token): GEMM starts after the LOAD.
    free = run([load, gemm, Finish()], Memory([MEM]), [MEM.base], cost=cost)
    tied = run(
        [load.replace(push_next=True), gemm.replace(pop_prev=True), Finish()],
        Memory([MEM]),
        [MEM.base],
        cost=cost,
    )
    assert free.cycles.total == max(2 + 76, 4 + 52)
    assert tied.cycles.total == 2 + 76 + 52
    assert tied.cycles.busy == {Unit.LOAD: 76, Unit.COMPUTE: 52, Unit.STORE: 0}
    assert tied.cycles.gemm_cycles == 52
    assert tied.cycles.mac_utilisation_gemm == pytest.approx(50 / 52)
    assert tied.cycles.mac_utilisation == pytest.approx(50 / tied.cycles.total)


def test_inconsistent_launch_arguments_are_refused():
    with pytest.raises(ValueError, match="prog_insns=5 exceeds"):
        run([Finish()], Memory([MEM]), prog_insns=5)
    with pytest.raises(ValueError, match="give a program"):
        run(None, Memory([MEM]))


def test_an_int32_store_reads_no_prm_row():
    store = Store(
        mode=StoreMode.INT32,
        base=0,
        x_size=1,
        y_size=1,
        z_size=2,
        z_stride=4 * B,
        use_prm=True,
        m_or_prm=NPU.prm_rows - 1,
    )
    assert run([store, Finish()], Memory([MEM]), [MEM.base]).ok
    res = run([store.replace(mode=StoreMode.INT8), Finish()], Memory([MEM]), [MEM.base])
    assert res.error == EngineError.BUFFER_RANGE and "PRM rows" in res.message
