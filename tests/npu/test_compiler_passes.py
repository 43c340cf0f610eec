"""The compiler's passes one by one: layout, pack, tile, tokens, legalize."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from npu_util import SMALL, i8, npu_outputs, single

from xrt.dtypes import DataType, TensorType
from xrt.hw import isa
from xrt.hw.targets import NPU
from xrt.layout import ChannelTiled
from xrt.network import run_network_reference
from xrt.npu import golden
from xrt.npu.compiler import (
    ConvGeom,
    Step,
    compile_run,
    conv_blocks,
    from_tiled,
    insert_tokens,
    plan_conv,
    prm_rows,
    refusal,
    to_tiled,
)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 40), st.integers(1, 5), st.integers(1, 5), st.booleans())
def test_tiled_layout_round_trips_and_pads_with_zero(
    n: int, c: int, h: int, w: int, rank2: bool
) -> None:
    rng = np.random.default_rng(c * 31 + h)
    x = i8(rng, n, c) if rank2 else i8(rng, n, c, h, w)
    data = to_tiled(x, 16)
    z = -(-c // 16)
    pix = 1 if rank2 else h * w
    assert data.size == n * z * pix * 16
    np.testing.assert_array_equal(from_tiled(data, x.shape, 16), x)
    lanes = data.view(np.int8).reshape(n, z, pix, 16)
    assert not lanes[:, -1, :, c - (z - 1) * 16 :].any()  # padding lanes are 0
    # Channel 17 of pixel (0, 0) of image 0 sits in plane 1, lane 1.
    if c > 17:
        assert lanes[0, 1, 0, 1] == (x[0, 17] if rank2 else x[0, 17, 0, 0])
    # The bytes of a host tensor stored ChannelTiled(16) over NCHW (NC): the engine's layout.
    tt = TensorType(DataType.SINT8, x.shape, "NC" if rank2 else "NCHW")
    stored = ChannelTiled(16).to_hardware(x, tt)
    np.testing.assert_array_equal(stored.view(np.uint8).reshape(-1), data)


def test_depthwise_and_grouped_blocks_are_block_sparse() -> None:
    rng = np.random.default_rng(0)
    w = rng.integers(1, 128, size=(32, 1, 3, 3), dtype=np.int8)  # depthwise, 32 channels
    pk = conv_blocks(w, 32, 16)
    assert pk.ib_n == (1, 1) and pk.ib_lo == (0, 1) and len(pk.blocks) == 2 * 9
    blk = pk.blocks[pk.first[1] + 4]  # output block 1, tap (1, 1)
    np.testing.assert_array_equal(np.diag(blk), w[16:, 0, 1, 1])
    assert not (blk - np.diag(np.diag(blk))).any()
    # groups = 2 over 8 channels: output 5 (group 1) reads inputs 4..7 only.
    w = rng.integers(1, 128, size=(8, 4, 1, 1), dtype=np.int8)
    blk = conv_blocks(w, 2, 16).blocks[0]
    assert not blk[5, :4].any() and (blk[5, 4:8] == w[5, :, 0, 0]).all()
    assert not blk[8:].any() and not blk[:, 8:].any()


def test_prm_rows_hold_shift_and_multiplier() -> None:
    rows = prm_rows(np.array([2**15 - 1, 0, 1]), np.array([46, 0, 14]), 16)
    assert rows.shape == (1, 16)
    assert rows[0, 0] == (46 << 16) | 0x7FFF and rows[0, 1] == 0 and rows[0, 2] == (14 << 16) | 1
    assert not rows[0, 3:].any()  # padding channels requantize to 0


def _geom(c: int, h: int, w: int, o: int, k: int) -> ConvGeom:
    zi, zo = -(-c // 16), -(-o // 16)
    return ConvGeom(c, h, w, o, h, w, k, k, 1, 1, 1, 1, k // 2, k // 2, (zi,) * zo, c)


def test_tiler_keeps_weights_resident_and_prints_its_choice() -> None:
    plan = plan_conv(_geom(64, 56, 56, 64, 3), NPU)
    assert not isinstance(plan, str)
    assert plan.wgt_resident and plan.th * 56 * plan.n_ob <= NPU.acc_rows // 2
    text = str(plan)
    assert "weights resident" in text and f"tile {plan.th} rows" in text
    # Tiny buffers: rows, output blocks and input block passes all split.
    small = plan_conv(_geom(64, 20, 20, 64, 3), SMALL)
    assert not isinstance(small, str)
    assert small.th < 20 and small.n_ob < 4 and small.n_ib < 4
    assert isinstance(plan_conv(_geom(64, 4, 1000, 16, 3), SMALL), str)  # nothing fits


def test_tokens_order_load_compute_store_and_balance() -> None:
    one = {"y_size": 1, "z_size": 1}
    load = Step(
        isa.Load(buffer=isa.Buffer.INP, base=1, x_size=4, x_stride=16, **one),
        [("mem1", 0, 64)],
        [("INP", 0, 4)],
    )
    gemm = Step(
        isa.Gemm(n0=4, n1=1, n2=1, acc_s0=1, inp_s0=1),
        [("INP", 0, 4), ("WGT", 0, 1)],
        [("ACC", 0, 4)],
    )
    store = Step(
        isa.Store(
            base=2, x_size=4, x_stride=16, sram_x_stride=1, m_or_prm=1, hi=127, lo=-128, **one
        ),
        [("ACC", 0, 4)],
        [("mem2", 0, 64)],
    )
    reload = Step(
        isa.Load(buffer=isa.Buffer.INP, base=2, x_size=4, x_stride=16, **one),
        [("mem2", 0, 64)],
        [("INP", 0, 4)],
    )
    prog = insert_tokens([load, gemm, store, reload])
    kinds = [type(i).__name__ for i in prog]
    # The reload reads what the store wrote (through a SYNC on COMPUTE) and overwrites
    # the rows the GEMM read.
    assert kinds == ["Load", "Gemm", "Store", "Sync", "Load", "Finish"]
    assert prog[0].push_next and prog[1].pop_prev and prog[1].push_next and prog[2].pop_prev
    assert prog[2].push_prev and prog[3].pop_next and prog[3].push_prev and prog[4].pop_next
    report = golden.check(prog, [0, 0x1000_0000, 0x1000_1000], "buyi")
    assert report.ok and not report.findings, str(report)


def _conv_net(c: int = 32, hw: int = 12, k: int = 3, seed: int = 3):  # type: ignore[no-untyped-def]
    """A k x k conv, C -> C channels, hw x hw, same padding."""
    rng = np.random.default_rng(seed)
    params = {
        "weight": rng.integers(-127, 128, size=(c, c, k, k), dtype=np.int8),
        "bias": rng.integers(-100, 100, c).astype(np.int32),
        "multiplier": np.full(c, 20000, np.int32),
        "shift": np.full(c, 20, np.int32),
    }
    attrs = {"strides": [1, 1], "pads": [k // 2] * 4, "dilations": [1, 1], "groups": 1,
             "lo": -128, "hi": 127, "out_scale": 1.0}  # fmt: skip
    return single("QConv2d", [i8(rng, 1, c, hw, hw)], attrs, params)


_QUEUES = {  # queue -> (pushing unit, push flag, popping unit, pop flag)
    "L2C": (isa.Unit.LOAD, "push_next", isa.Unit.COMPUTE, "pop_prev"),
    "C2L": (isa.Unit.COMPUTE, "push_prev", isa.Unit.LOAD, "pop_next"),
    "C2S": (isa.Unit.COMPUTE, "push_next", isa.Unit.STORE, "pop_prev"),
    "S2C": (isa.Unit.STORE, "push_prev", isa.Unit.COMPUTE, "pop_next"),
}


def _token_pairs(program: list[isa.Instruction]) -> list[tuple[str, int, int, str, str]]:
    """Every token of a program: (queue, pushing pc, popping pc, push flag, pop flag)."""
    pairs = []
    for q, (pu, pf, cu, cf) in _QUEUES.items():
        pushes = [i for i, x in enumerate(program) if isa.unit_of(x) == pu and getattr(x, pf)]
        pops = [i for i, x in enumerate(program) if isa.unit_of(x) == cu and getattr(x, cf)]
        assert len(pushes) == len(pops), q
        pairs += [(q, a, b, pf, cf) for a, b in zip(pushes, pops, strict=True)]
    return pairs


def test_race_checker_catches_every_single_removed_token() -> None:
    # Mutation test of compiler and checker together: each token the compiler inserted
    # orders a real conflict, so removing it (its push and its pop) must be a race.
    net, _ = _conv_net()
    prog = compile_run(net, SMALL)
    bases = [0x1_0000_0000 + i * 0x10_0000 for i in range(len(prog.bases))]
    assert golden.check(prog.instructions, bases, "buyi", SMALL).ok
    pairs = _token_pairs(prog.instructions)
    assert len(pairs) > 10
    missed = []
    for q, push, pop, pf, cf in pairs:
        broken = list(prog.instructions)
        broken[push] = broken[push].replace(**{pf: False})
        broken[pop] = broken[pop].replace(**{cf: False})
        if not golden.check(broken, bases, "buyi", SMALL).of_kind("race"):
            missed.append((q, push, pop))
    assert not missed, f"tokens whose removal is no race: {missed}"


def test_a_1x1_conv_overlaps_weight_loads_and_stores_with_its_gemms() -> None:
    # 64 -> 64 channels, 16x16: each output block's GEMM waits for that block's weights
    # only (block 0's before the first input tile, the others after it, in LOADs of 1, 1,
    # 2, 4, ... blocks), and the last tile stores block by block,
    # so the golden model's cost model sees the MAC array busy >= 80% of the run.
    net, feeds = _conv_net(64, 16, 1, seed=5)
    outs, prog, res = npu_outputs(net, feeds)
    np.testing.assert_array_equal(outs[net.outputs[0]], run_network_reference(net, feeds)[0])
    insns = prog.instructions
    pushed_by = {pop: push for q, push, pop, _, _ in _token_pairs(insns) if q == "L2C"}
    gemms = [i for i, x in enumerate(insns) if isinstance(x, isa.Gemm)]
    wgt = [(i, x) for i, x in enumerate(insns) if getattr(x, "buffer", None) == isa.Buffer.WGT]
    assert [(x.sram, x.x_size) for _, x in wgt] == [(0, 4), (4, 4), (8, 8)]  # blocks 0, 1, 2-3
    first = insns[pushed_by[gemms[0]]]  # the first tile's input, after block 0's weights only
    assert first.buffer == isa.Buffer.INP and wgt[1][0] > pushed_by[gemms[0]] > wgt[0][0]
    assert [pushed_by.get(pc) for pc in gemms[1:4]] == [wgt[1][0], wgt[2][0], None]
    stores = [i for i, x in enumerate(insns) if isinstance(x, isa.Store)]
    assert [insns[i].z_size for i in stores[-4:]] == [1, 1, 1, 1]
    assert stores[-1] > gemms[-1] > stores[-2]  # one block's STORE left after the last GEMM
    assert res.cycles.gemm_cycles / res.cycles.total >= 0.8, res.cycles


def test_legalize_names_its_reasons() -> None:
    net, _ = _conv_net()
    op = net.ops[1]
    params = dict(net.op_params(op))
    assert refusal(op, net.values, params, NPU) is None
    params["bias"] = np.full(32, 2**31 - 1000, np.int32)
    assert "accumulator bound" in refusal(op, net.values, params, NPU)
    rng = np.random.default_rng(0)
    tnet, _ = single("Transpose", [i8(rng, 1, 4, 3, 5)], {"perm": [0, 2, 3, 1]})
    why = refusal(tnet.ops[1], tnet.values, {}, NPU)
    assert why is not None and "mixes channels with pixels" in why
    with pytest.raises(Exception, match="not for the NPU"):
        compile_run(tnet)
    # QConcat's per-lane (M, S) rows: 9 output planes exceed half of SMALL's 16 PRM rows.
    xs = [i8(rng, 1, 9, 2, 2), *(i8(rng, 1, 40, 2, 2) for _ in range(3))]
    attrs = {"axis": 1, "multipliers": [16384] * 4, "shifts": [14] * 4, "lo": -128, "hi": 127,
             "out_scale": 1.0}  # fmt: skip
    cnet, _ = single("QConcat", xs, attrs)
    assert refusal(cnet.ops[1], cnet.values, {}, NPU) is None
    assert "PRM rows" in refusal(cnet.ops[1], cnet.values, {}, SMALL)
