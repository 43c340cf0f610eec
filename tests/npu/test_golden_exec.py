"""The golden model's executor on hand-written programs, against numpy, `xrt.ops` and the
spec's pseudo-code (golden_refs.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from golden_refs import naive_requantize

from xrt.hw.config import MemoryWindow
from xrt.hw.isa import (
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
)
from xrt.hw.targets import NPU
from xrt.npu.golden import CostModel, Machine, Memory, Queue, prm_word, run
from xrt.ops.conv import qconv2d_forward

B = NPU.block
MEM = MemoryWindow("mem", 0x1000_0000, 1 << 20)


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
    from xrt.hw.isa import encode_program

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


def test_a_ddr_moves_one_beat_per_cycle_for_reads_and_writes_the_ocm_one_each_way():
    """With ``ddr_shared_bus`` a LOAD and a STORE that overlap in time on one DDR memory
    share its data bus (their beats add up); on the OCM, or with the bus not shared, they
    overlap freely."""
    from dataclasses import replace

    cost = CostModel(burst_latency=10, issue_cycles=2, fetch_cycles=2)
    load = Load(buffer=Buffer.INP, base=0, x_size=256, y_size=1, z_size=1, x_stride=B)
    store = Store(
        mode=StoreMode.INT32, base=1, x_size=64, y_size=1, z_size=1, x_stride=4 * B,
        sram_x_stride=1,
    )  # fmt: skip
    assert (cost.bus_beats(load, NPU), cost.bus_beats(store, NPU)) == (256, 256)
    ddr = MemoryWindow("plddr", 0x1_0000_0000, 1 << 20)
    ocm = MemoryWindow("ocm", 0xF000_0000, 1 << 20)

    def total(window: MemoryWindow, shared: int) -> int:
        config = replace(NPU, ddr_shared_bus=shared)
        bases = [window.base, window.base + 0x8000]
        res = run([load, store, Finish()], Memory([window]), bases, config=config, cost=cost)
        assert res.ok, res
        return res.cycles.total

    alone = max(2 + cost.duration(load, NPU), 4 + cost.duration(store, NPU))
    assert total(ocm, 1) == total(ddr, 0) == alone
    assert total(ddr, 1) >= 2 + 256 + 256 > alone


def test_a_data_bus_booking_fills_the_first_free_cycles():
    """Bookings come in program order, not time order: a later booking that starts earlier
    takes the gaps left between earlier ones."""
    from xrt.npu.golden.cost import DataBus

    bus = DataBus()
    assert bus.book(0, 10) == 10
    assert bus.book(20, 5) == 25
    assert bus.book(5, 8) == 18  # waits for cycle 10, then fits before 20
    assert bus.book(0, 5) == 28  # 18..20, then 25..28
    assert bus.book(30, 3) == 33
    assert bus.book(0, 1) == 29


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
