"""The memory planner: lifetimes, packing, on-chip split, and the programs it places."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xrt.network import Network, NetworkView, run_network_reference
from xrt.npu.compiler import compile_run
from xrt.npu.compiler._golden_run import run_on_golden
from xrt.npu.compiler._memplan import ALIGN, Buffer, Packing, overlaps, pack, split
from xrt.npu.compiler._simulate import partition
from xrt.quant import quantize_network

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import random_feeds
from onnx_zoo import squeezenet11_model


@st.composite
def _buffers(draw: st.DrawFn) -> list[Buffer]:
    n = draw(st.integers(0, 24))
    out = []
    for i in range(n):
        start = draw(st.integers(0, 30))
        end = draw(st.integers(start, 31))
        size = draw(st.integers(0, 5000))
        out.append(Buffer(f"t{i}", size, start, end, size * draw(st.integers(1, 4))))
    return out


def _peak(buffers: list[Buffer]) -> int:
    """Bytes live at once at the busiest operator: no packing can be smaller."""
    return max(
        (sum(-(-b.size // ALIGN) * ALIGN for b in buffers if b.start <= k <= b.end)
         for k in range(32)),
        default=0,
    )  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(_buffers())
def test_no_two_live_tensors_overlap(buffers: list[Buffer]) -> None:
    packing = pack(buffers)
    assert overlaps(buffers, packing) == []
    assert all(packing.offsets[b.name] % ALIGN == 0 for b in buffers)
    assert all(packing.offsets[b.name] + b.size <= packing.size for b in buffers)
    assert _peak(buffers) <= packing.size <= sum(-(-b.size // ALIGN) * ALIGN for b in buffers)


@settings(max_examples=200, deadline=None)
@given(_buffers(), st.integers(0, 20000))
def test_split_keeps_the_on_chip_set_within_capacity(buffers: list[Buffer], cap: int) -> None:
    on_chip, external = split(buffers, cap)
    assert sorted(b.name for b in on_chip + external) == sorted(b.name for b in buffers)
    assert pack(on_chip).size <= cap
    if cap > 0 and pack(buffers).size <= cap:
        assert not external


def test_tensors_that_never_live_together_share_bytes() -> None:
    a, b, c = Buffer("a", 1000, 0, 1), Buffer("b", 1000, 1, 2), Buffer("c", 1000, 2, 3)
    p = pack([a, b, c])
    assert p.offsets["a"] == p.offsets["c"] != p.offsets["b"]
    assert p.size == 2 * 1024
    assert overlaps([a, b, c], Packing({"a": 0, "b": 0, "c": 1024}, 2048)) == [("a", "b")]


def _squeezenet() -> tuple[Network, dict[str, np.ndarray], NetworkView]:
    model = squeezenet11_model(hw=35, classes=20)
    net = Network.from_onnx(model)
    qnet = quantize_network(net, [random_feeds(model, seed=s) for s in range(2)])
    feeds = random_feeds(model, seed=9)
    (ops,) = [ops for npu, ops in partition(qnet) if npu]
    return qnet, feeds, NetworkView(qnet, ops)


def test_a_program_split_between_ocm_and_ddr_is_exact_and_its_placement_is_true() -> None:
    """SqueezeNet-shaped with a small OCM: some intermediates on chip, the rest in DDR; the
    outputs are bit-exact, and every intermediate that the placement says is still intact
    after the run reads back as the host computes it."""
    qnet, feeds, view = _squeezenet()
    whole = compile_run(view)
    assert whole.ocm_bytes == 0 and whole.intermediates
    unshared = sum(p.nbytes for p in whole.intermediates if not p.alias_of)
    assert whole.scratch_bytes < unshared / 2
    prog = compile_run(view, ocm_bytes=whole.scratch_bytes // 3)
    kinds = {b.kind for b in prog.bases}
    assert {"ocm", "scratch"} <= kinds and 0 < prog.ocm_bytes <= whole.scratch_bytes // 3
    assert {p.memory for p in prog.intermediates} == {"ocm", "ddr"}
    for memory in ("ocm", "ddr"):
        group = [
            Buffer(p.name, p.nbytes, p.first_op, p.last_op)
            for p in prog.intermediates
            if p.memory == memory and not p.alias_of
        ]
        offsets = {p.name: p.offset for p in prog.intermediates if p.memory == memory}
        # Lifetimes in op ids (increasing along the run) order like positions.
        assert overlaps(group, Packing(offsets, 0)) == []
    ref = run_network_reference(qnet, feeds, return_all=True)
    assert isinstance(ref, dict)
    ins = {v: ref[v] for v in view.inputs}
    got, _ = run_on_golden(prog, ins, target="zg330", intermediates=True)
    for v in view.outputs:
        np.testing.assert_array_equal(got[v], ref[v])
    kept = [p.name for p in prog.intermediates if p.readable_after and "#" not in p.name]
    assert kept
    for name in kept:
        np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
