"""Tuning records (`xrt.tuning`): the tiler's candidates, records' trust rules, tuned programs.

The tuned program must equal the host kernels bit for bit (it is only another tiling), a
record that cannot be trusted must be passed over with a note (the compile still gives the
default program), and a compile with records must never be slower in simulated cycles than
one without, on the networks it was tuned on.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from npu_util import SMALL, i8, single

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from light_models import LIGHT_MODELS, reduced, with_random_weights
from netutil import random_feeds

from xrt.hw.targets import NPU
from xrt.network import Network, NetworkView, run_network_reference
from xrt.npu.compiler import (
    ConvGeom,
    PlanChoice,
    compile_run,
    conv_candidates,
    partition,
    plan_conv,
    run_on_golden,
    simulated_cycles,
    tiled_geoms,
)
from xrt.npu.compiler._pack import block_spans, conv_blocks
from xrt.npu.compiler._simulate import simulate_network
from xrt.ops.conv import QCONV2D_KERNELS
from xrt.quant import quantize_network
from xrt.tuning import (
    FORMAT_VERSION,
    HostTuner,
    NpuTuner,
    TuningRecords,
    npu_code_fingerprint,
)


def _conv(rng: np.random.Generator, c: int, o: int, hw: int, k: int, **attrs: object):  # type: ignore[no-untyped-def]
    groups = int(attrs.pop("groups", 1))  # type: ignore[call-overload]
    a = {"strides": [1, 1], "pads": [k // 2] * 4, "dilations": [1, 1], "groups": groups,
         "lo": -128, "hi": 127, "out_scale": 1.0, **attrs}  # fmt: skip
    params = {
        "weight": rng.integers(-8, 8, (o, c // groups, k, k), dtype=np.int8),
        "bias": rng.integers(-300, 300, o).astype(np.int32),
        "multiplier": rng.integers(1 << 13, 1 << 14, o).astype(np.int32),
        "shift": np.full(o, 18, np.int32),
    }
    return single("QConv2d", [i8(rng, 1, c, hw, hw)], a, params)


def _layers() -> list[tuple[str, object]]:
    rng = np.random.default_rng(7)
    return [
        ("3x3", _conv(rng, 40, 48, 12, 3)),
        ("1x1 strided", _conv(rng, 64, 32, 11, 1, strides=[2, 2], pads=[0, 0, 0, 0])),
        ("grouped", _conv(rng, 32, 32, 9, 3, groups=4)),
        ("stem (columns folded)", _conv(rng, 3, 24, 14, 3, strides=[2, 2])),
    ]


def test_tiler_default_is_among_candidates_and_a_choice_is_validated() -> None:
    g = ConvGeom(64, 56, 56, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, (4,) * 4, 64)
    default = plan_conv(g, NPU)
    assert not isinstance(default, str)
    cands = conv_candidates(g, NPU)
    assert not isinstance(cands, str)
    narrow = conv_candidates(g, NPU, wide=False)
    assert not isinstance(narrow, str)
    assert default in narrow and set(narrow) <= set(cands) and len(cands) > len(narrow)
    assert [c.estimate for c in cands] == sorted(c.estimate for c in cands)
    other = next(c for c in cands if c.choice != default.choice)
    assert plan_conv(g, NPU, other.choice) == other
    assert PlanChoice.from_list(other.choice.to_list()) == other.choice
    too_tall = PlanChoice(56, 4, 4, "rows")  # 56 x 56 x 4 blocks: more than half of ACC
    assert too_tall not in {c.choice for c in cands}
    why = plan_conv(g, NPU, too_tall)
    assert isinstance(why, str) and "not one this layer can use" in why
    with pytest.raises(ValueError):
        PlanChoice.from_list([1, 2, "x", "rows"])


@pytest.mark.parametrize("cfg", [NPU, SMALL], ids=["npu", "small"])
@pytest.mark.parametrize("which", range(4))
def test_every_measured_candidate_is_bit_exact(cfg: object, which: int) -> None:
    # Tuning may pick any of the best candidates of the wide set: each must compute exactly
    # what the host kernel does (the small buffers force row tiles, block chunks, passes).
    name, (net, feeds) = _layers()[which]  # type: ignore[misc]
    want = run_network_reference(net, feeds)[0]
    (op,) = net.ops[1:-1]  # between the Input and Output ops
    per_geom = [conv_candidates(g, cfg) for g in tiled_geoms(op, net, cfg)]  # type: ignore[arg-type]
    assert all(not isinstance(c, str) for c in per_geom)
    seen = set()
    for k in range(6):
        choice = tuple(c[min(k, len(c) - 1)].choice for c in per_geom)  # type: ignore[index]
        if choice in seen:
            continue
        seen.add(choice)
        notes: list[str] = []
        prog = compile_run(net, cfg, plans={op.op_id: choice}, notes=notes)  # type: ignore[arg-type]
        assert not notes and "[recorded tiling]" in prog.layers[0].detail
        outs, res = run_on_golden(prog, feeds, cfg=cfg)  # type: ignore[arg-type]
        np.testing.assert_array_equal(outs[net.outputs[0]], want, err_msg=f"{name} {choice}")
        assert sum(res.tokens_left.values()) == 0


def _tuned_small_net() -> tuple[Network, dict[str, np.ndarray], TuningRecords]:
    net, feeds = _layers()[0][1]  # type: ignore[misc]
    records = TuningRecords()
    NpuTuner(records, SMALL, tune=True, top_k=4).plans_for(net)
    assert len(records) == 1
    return net, feeds, records


def test_records_round_trip_and_save_is_atomic(tmp_path: Path) -> None:
    _, _, records = _tuned_small_net()
    path = tmp_path / "sub" / "records.json"
    records.save(path)
    loaded = TuningRecords.load(path)
    assert loaded == records and not loaded.notes
    (rec,) = list(loaded)
    assert rec.format == FORMAT_VERSION and rec.measured_on == "cost-model"
    assert rec.code == npu_code_fingerprint() and rec.cost <= rec.default_cost
    assert [p.name for p in path.parent.iterdir()] == ["records.json"]  # no temporary left
    assert TuningRecords.load(tmp_path / "missing.json") == TuningRecords()


def _edited(records: TuningRecords, **changes: object) -> TuningRecords:
    return TuningRecords([dataclasses.replace(r, **changes) for r in records])  # type: ignore[arg-type]


def test_untrusted_records_are_ignored_with_a_note(tmp_path: Path) -> None:
    net, feeds, records = _tuned_small_net()
    (op,) = net.ops[1:-1]  # between the Input and Output ops
    default = compile_run(net, SMALL).encode()
    (rec,) = list(records)
    key = rec.key
    cases = {
        "stale: made by other code": _edited(records, code="0123456789abcdef"),
        "stale: format": _edited(records, format=FORMAT_VERSION + 1),
        "foreign": _edited(records, key=dataclasses.replace(key, hardware="npu-other")),
        "no tilings": _edited(records, choice={"kernel": "im2col"}),
    }
    for why, recs in cases.items():
        tuner = NpuTuner(recs, SMALL)  # not tuning: an untrusted record is not replaced
        plans = tuner.plans_for(net)
        assert plans == {}, why
        assert any(why in line for line in recs.notes), (why, recs.notes)
    # An illegal tiling (too tall for SMALL's buffers): the compiler refuses it.
    bad = _edited(records, choice={"tilings": [[12, 3, 3, "rows"]]})
    plans = NpuTuner(bad, SMALL).plans_for(net)
    assert plans == {op.op_id: (PlanChoice(12, 3, 3, "rows"),)}
    notes: list[str] = []
    prog = compile_run(net, SMALL, plans=plans, notes=notes)
    assert prog.encode() == default
    assert len(notes) == 1 and "recorded tiling ignored" in notes[0]
    # A corrupt file, and a record edited by hand (its digest no longer matches).
    (tmp_path / "corrupt.json").write_text('{"format": 1, "records": [')
    corrupt = TuningRecords.load(tmp_path / "corrupt.json")
    assert len(corrupt) == 0 and "not a tuning records file" in corrupt.notes[0]
    doc = {"format": FORMAT_VERSION, "records": [rec.to_dict()]}
    doc["records"][0]["key"]["op_type"] = "QGemm"
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    edited = TuningRecords.load(tmp_path / "edited.json")
    assert len(edited) == 0 and "digest does not match" in edited.notes[0]
    # Each untrusted case still compiles the default program, and it is still exact.
    outs, _ = run_on_golden(compile_run(net, SMALL, plans=plans), feeds, cfg=SMALL)
    np.testing.assert_array_equal(outs[net.outputs[0]], run_network_reference(net, feeds)[0])


def test_tuning_reuses_records_and_tunes_only_once() -> None:
    net, _, records = _tuned_small_net()
    tuner = NpuTuner(records, SMALL, tune=True)
    first = tuner.plans_for(net)
    assert tuner.report.reused == 1 and tuner.report.measurements == 0
    (rec,) = list(records)
    assert (first != {}) == (rec.cost < rec.default_cost)


def test_host_kernel_variants_are_bit_exact_and_recorded() -> None:
    rng = np.random.default_rng(3)
    for dil, stride, groups in ((1, 1, 1), (2, 2, 1), (1, 2, 4), (1, 1, 16)):
        net, feeds = _conv(rng, 16, 32, 13, 3, dilations=[dil, dil], strides=[stride] * 2,
                           groups=groups)  # fmt: skip
        (op,) = net.ops[1:-1]  # between the Input and Output ops
        x = next(iter(feeds.values()))
        outs = [k(op, [x], net.op_params(op))[0] for k in QCONV2D_KERNELS.values()]
        np.testing.assert_array_equal(outs[0], outs[1])
    records = TuningRecords()
    tuner = HostTuner(records, tune=True, repeats=1)
    kernel = tuner.kernel_for(op, net)
    (rec,) = list(records)
    assert rec.measured_on == "host-timer" and kernel is QCONV2D_KERNELS[rec.choice["kernel"]]
    assert HostTuner(records).kernel_for(op, net) is kernel and tuner.tuned == 1


# The onnx wheel's light networks, reduced where that keeps every lowering: each input size
# is the smallest `reduced` supports for the network. vgg19 (its random 100M-weight dense
# layers take most of a minute to make) and inception_v1 (`reduced` cannot shrink it) are
# measured at full size by bench/bench_tuning.py, which checks the same property.
_SIZES = {
    "squeezenet": 32,
    "shufflenet": 32,
    "inception_v2": 32,
    "resnet50": 16,
    "densenet121": 32,
    "bvlc_alexnet": 64,
    "zfnet512": 64,
}


def test_the_sizes_cover_the_wheel() -> None:
    assert set(_SIZES) | {"vgg19", "inception_v1"} == set(LIGHT_MODELS)


@pytest.mark.parametrize("name", sorted(_SIZES))
def test_tuned_light_network_is_never_slower(name: str) -> None:
    # Tuned on the cost model, then compiled again from the records alone: never more
    # simulated cycles than without them, on every run of the network (the tuner checks each
    # run whole and gives back the tilings that made it slower); bit-exact on two networks
    # here (the golden model's full run is the slow part), every candidate kind above.
    model = reduced(with_random_weights(name, seed=1), _SIZES[name])
    qnet = quantize_network(Network.from_onnx(model), [random_feeds(model, seed=0)])
    records = TuningRecords()
    tuner = NpuTuner(records, tune=True, top_k=2)
    again = NpuTuner(records)
    changed = 0
    for npu, ops in partition(qnet):
        if not npu:
            continue
        view = NetworkView(qnet, ops)
        tuner.plans_for(view)
        plans = again.plans_for(view)
        untuned = compile_run(view)
        tuned = compile_run(view, plans=plans)
        changed += len(plans)
        if plans:
            assert tuned.encode() != untuned.encode()
        assert simulated_cycles(tuned) <= simulated_cycles(untuned), name
    assert changed == tuner.report.changed
    assert again.report.reused == tuner.report.tuned + tuner.report.reused
    assert all("made the run slower whole" in line for line in records.notes), records.notes
    if name in ("squeezenet", "shufflenet"):
        feeds = random_feeds(model, seed=42)
        got, _ = simulate_network(qnet, feeds, plans_for=again.plans_for)
        for g, w in zip(got, run_network_reference(qnet, feeds), strict=True):
            np.testing.assert_array_equal(g, w)


def test_block_spans_match_the_packed_blocks() -> None:
    # The geometry the tiler plans with reads the spans without packing the weights.
    for o, cig, groups, b in [(24, 3, 1, 16), (32, 1, 32, 16), (96, 8, 4, 16), (17, 24, 1, 8)]:
        pk = conv_blocks(np.zeros((o, cig, 1, 1), np.int8), groups, b)
        assert block_spans(o, cig, groups, b) == (pk.ib_lo, pk.ib_n)
