"""BuyiBackend and ZG330Backend against a real ``npu-emu serve`` (real processes, RTL engine).

Every result is compared bit for bit with `HostBackend` on the same quantized network: the
host integer kernels are the specification (docs/quantization.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import random_feeds
from onnx_zoo import COMPOSITES

from npuemu.server.launch import ServerProcess
from xrt import Device, HostDevice, Tensor, TensorType
from xrt.backend import BuyiBackend, HostBackend
from xrt.backend.npu import to_hardop
from xrt.dtypes import QuantParams
from xrt.network import Network, NetworkBuilder
from xrt.npu_device import NpuDevice
from xrt.quant import quantize_network
from xrt.session import Session

pytestmark = pytest.mark.sim


def _quantized(model, seeds: int = 2) -> Network:  # type: ignore[no-untyped-def]
    net = Network.from_onnx(model)
    return quantize_network(net, [random_feeds(model, seed=s) for s in range(seeds)])


def _host(net: Network, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with Session.create([HostBackend], net).apply() as sess:
        return [t.numpy() for t in sess.forward(feeds)]


def _assert_same(got: list[Tensor], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


@pytest.fixture
def buyi(open_buyi: Callable[..., NpuDevice]) -> NpuDevice:
    return open_buyi()


@pytest.fixture
def zg330(zg330_server: ServerProcess) -> Iterator[NpuDevice]:
    dev = Device.open(zg330_server.url)
    assert isinstance(dev, NpuDevice)
    yield dev
    dev.close()


def manual_float(seed: int = 0) -> Network:
    """The manual's network before compiling: a float convolution on the host, a quantize,
    an int8 convolution, a dequantize, ReLU and pooling, between the Input op (0) and the
    Output op (7): op ids 0..7 as in the manual."""
    rng = np.random.default_rng(seed)
    b = NetworkBuilder("manual")
    x = b.input("x", TensorType("FP32", [1, 3, 12, 12]))
    w = b.param("w", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32))
    (c,) = b.add("Conv2d", [x], {"pads": [1, 1, 1, 1]}, {"weight": w}, name="conv")
    (q,) = b.add("Cast", [c], {"to": "SInt8", "scale": 0.05}, name="quantize")
    qw = b.param("qw", rng.integers(-60, 60, (16, 8, 3, 3)).astype(np.int8))
    qb = b.param("qb", rng.integers(-500, 500, 16).astype(np.int32))
    qm = b.param("qm", rng.integers(1 << 14, 1 << 15, 16).astype(np.int32))
    qs = b.param("qs", np.full(16, 20, np.int32))
    (h,) = b.add(
        "QConv2d",
        [q],
        {"pads": [1, 1, 1, 1], "lo": -128, "hi": 127, "out_scale": 0.04},
        {"weight": qw, "bias": qb, "multiplier": qm, "shift": qs},
        name="npu_conv",
    )
    (f,) = b.add("Cast", [h], {"to": "FP32", "scale": 0.04}, name="dequantize")
    (r,) = b.add("Relu", [f], name="relu")
    (m,) = b.add("MaxPool2d", [r], {"kernel": [2, 2], "strides": [2, 2]}, name="pool")
    return b.build([m])


def manual_network(seed: int = 0) -> Network:
    """The manual's ``Input -> Conv2d -> Cast -> HardOp -> Cast -> ReLU -> MaxPool2d ->
    Output`` (ids 0..7): op 3 compiled ahead of time into a Buyi HardOp."""
    return to_hardop(manual_float(seed), [3], "buyi")


MANUAL_BINDINGS = {0: HostBackend, 1: HostBackend, 2: HostBackend, 3: BuyiBackend,
                   4: BuyiBackend, 5: HostBackend, 6: HostBackend, 7: HostBackend}  # fmt: skip


def _x(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 12, 12)).astype(np.float32)


def _assert_manual_bindings(sess: Session) -> None:
    bindings = sess.backend_bindings()
    assert sorted(bindings) == sorted(MANUAL_BINDINGS)
    for op_id, cls in MANUAL_BINDINGS.items():
        assert bindings[op_id].is_type(cls), (op_id, bindings[op_id])


def test_manual_1_1_1_create_by_priority(buyi: NpuDevice) -> None:
    network = manual_network()
    assert network.op(3).op_type == "HardOp"
    want = _host(manual_float(), {"x": _x()})
    sess = Session.create([BuyiBackend, HostBackend], network, [buyi, HostDevice.default()])
    sess.apply()
    _assert_manual_bindings(sess)
    _assert_same(sess.forward([_x()]), want)
    sess.close()
    sess2 = Session.create_by_order(
        network, [BuyiBackend(), HostBackend()], [buyi, HostDevice.default()]
    ).apply()
    _assert_manual_bindings(sess2)
    _assert_same(sess2.forward([_x()]), want)
    sess2.close()


def test_manual_1_1_2_create_with_backends(buyi: NpuDevice) -> None:
    """As the manual writes it: ``network.view([0, 1, 2, 5, 6, 7])`` (Input and Output
    included) to the host, ``network.view([3, 4])`` to Buyi, the session on
    ``network.view(0)``; every op, 0 and 7 too, in the time profile; step_to 0 and 7."""
    network = manual_network()
    assert [op.op_type for op in network.ops] == [
        "Input", "Conv2d", "Cast", "HardOp", "Cast", "Relu", "MaxPool2d", "Output",
    ]  # fmt: skip
    assert network.op_ids == list(range(8))
    host_backend = HostBackend.create(network.view([0, 1, 2, 5, 6, 7]), HostDevice.default())
    buyi_backend = BuyiBackend.create(network.view([3, 4]), buyi)
    sess = Session.create_with_backends(network.view(0), [host_backend, buyi_backend]).apply()
    _assert_manual_bindings(sess)
    sess.enable_time_profile(True)
    want = _host(manual_float(), {"x": _x()})
    _assert_same(sess.forward([_x()]), want)
    # Every op: Buyi runs the HardOp's program and the Cast (its output conversion) apart.
    assert list(sess.time_profile_results()) == list(range(8))
    (fed,) = sess.step_to(0, [_x()])
    np.testing.assert_array_equal(fed.numpy(), _x())
    _assert_same(sess.step_to(7), want)  # the Output op yields the network's outputs
    sess.close()


def test_manual_python_examples_as_written(buyi: NpuDevice, tmp_path: Path) -> None:
    """Manual 1.1.1, 1.1.2, 1.2 and 1.1.3 in Python, in the manual's own names and call
    shapes: ``import xir``, ``GenerateNetwork()``, ``Session.Create`` with the devices in
    the manual's order (the host device first, for ``[BuyiBackend, HostBackend]``),
    ``CreateByOrder`` with ``Init()``, ``Backend.Create(HostBackend, ...)``,
    ``CreateWithBackends``, ``dumpSnapshot`` and ``CreateWithSnapshot``. The manual's
    ``Device()`` is the emulated Buyi here; every session computes what the host computes."""
    import buyi_backend
    import host_backend
    import xir

    from xrt import Backend

    BuyiBackend, HostBackend = buyi_backend.BuyiBackend, host_backend.HostBackend  # noqa: N806
    device = buyi
    network = xir.GenerateNetwork()
    want = _host(manual_float(), {"x": _x()})  # the same weights, every op on the host
    # Input -> Conv2d -> Cast -> HardOp -> Cast -> ReLU -> MaxPool2d -> Output
    ops = [op for op in network.ops if op.op_type not in ("Input", "Output")]
    expected = [HostBackend, HostBackend, BuyiBackend, BuyiBackend, HostBackend, HostBackend]
    npu_ids = [ops[2].op_id, ops[3].op_id]
    host_ids = [op.op_id for op in network.ops if op.op_id not in npu_ids]
    if network.ops[0].op_type == "Input":  # the manual's own ids, once networks carry them
        assert (host_ids, npu_ids) == ([0, 1, 2, 5, 6, 7], [3, 4])

    def check(sess: Session) -> None:
        backend_bindings = sess.backendBindings()
        for op, cls in zip(ops, expected, strict=True):
            assert backend_bindings[op.op_id].is_type(cls), (op.describe(), cls)
        _assert_same(sess.forward([_x()]), want)

    # 1.1.1
    sess1 = Session.Create(
        [BuyiBackend, HostBackend], network.view(0), [HostDevice.Default(), device]
    )
    sess1.apply()
    check(sess1)
    sess2 = Session.CreateByOrder(
        network.view(0), [BuyiBackend.Init(), HostBackend.Init()], [HostDevice.Default(), device]
    )
    sess2.apply()
    check(sess2)
    # 1.1.2
    host_backend = Backend.Create(HostBackend, network.view(host_ids), HostDevice.Default())
    buyi_backend = Backend.Create(BuyiBackend, network.view(npu_ids), device)
    sess = Session.CreateWithBackends(network.view(0), [host_backend, buyi_backend])
    sess.apply()
    check(sess)
    # 1.2, then 1.1.3
    snapshot_file = tmp_path / "manual.snapshot"
    sess1.dumpSnapshot(snapshot_file)
    for s in (sess1, sess2, sess):
        s.close()
    restored = Session.CreateWithSnapshot(
        snapshot_file, [BuyiBackend, HostBackend], [device, HostDevice.Default()]
    )
    check(restored)
    restored.close()


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_networks_bit_exact_on_buyi(name: str, buyi: NpuDevice) -> None:
    model = COMPOSITES[name]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=42)
    sess = Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply()
    npu_ops = [i for i, b in sess.backend_bindings().items() if b.is_type(BuyiBackend)]
    assert any(qnet.op(i).op_type in ("QConv2d", "QGemm") for i in npu_ops)
    _assert_same(sess.forward(feeds), _host(qnet, feeds))
    launched = {i for ids in sess.backends[0].launches for i in ids}
    assert launched >= {i for i in npu_ops if qnet.op(i).op_type == "QConv2d"}
    sess.close()


def test_each_program_is_compiled_once_per_network(buyi: NpuDevice) -> None:
    """The second session on the same network finds its programs in the cache."""
    from xrt.backend.npu import PROGRAM_CACHE

    qnet = _quantized(COMPOSITES["small_cnn"]())
    PROGRAM_CACHE.clear()
    with Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply():
        misses = PROGRAM_CACHE.misses
    assert misses > 0
    with Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply():
        assert PROGRAM_CACHE.misses == misses and PROGRAM_CACHE.hits >= misses


def test_step_to_and_dumps_on_npu_layers_with_merging_off(buyi: NpuDevice, tmp_path: Path) -> None:
    model = COMPOSITES["small_cnn"]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=5)
    sess = Session.create([BuyiBackend, HostBackend], qnet, [buyi, None])
    sess.backends[0].auto_merge = False
    sess.apply()
    sess.set_dump_outputs(True, str(tmp_path), "SQB")
    everything = run_reference(qnet, feeds)
    for op in qnet.ops:
        got = sess.step_to(op.op_id, feeds)
        yields = op.inputs if op.op_type == "Output" else op.outputs
        for name, t in zip(yields, got, strict=True):
            np.testing.assert_array_equal(t.numpy(), everything[name], err_msg=op.describe())
    npu_ops = [i for i, b in sess.backend_bindings().items() if b.is_type(BuyiBackend)]
    assert npu_ops and all(list(tmp_path.glob(f"{i}_*")) for i in npu_ops)
    sess.close()


def run_reference(net: Network, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from xrt.network import run_network_reference

    out = run_network_reference(net, feeds, return_all=True)
    assert isinstance(out, dict)
    return out


def test_snapshot_round_trip_is_bit_identical_without_compiling(
    buyi: NpuDevice, tmp_path: Path
) -> None:
    from xrt.backend.npu import PROGRAM_CACHE

    model = COMPOSITES["small_cnn"]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=3)
    sess = Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply()
    want = sess.forward(feeds)
    sess.dump_snapshot(tmp_path / "small_cnn.snapshot")
    sess.close()
    PROGRAM_CACHE.clear()
    again = Session.create_with_snapshot(
        tmp_path / "small_cnn.snapshot", [BuyiBackend, HostBackend], [buyi, None]
    )
    assert PROGRAM_CACHE.misses == 0, "the snapshot's programs were not compiled again"
    _assert_same(again.forward(feeds), [t.numpy() for t in want])
    again.close()


def test_snapshot_for_another_target_is_refused(
    buyi: NpuDevice, zg330: NpuDevice, tmp_path: Path
) -> None:
    from xrt import ErrorCode, XrtError
    from xrt.backend import ZG330Backend

    qnet = _quantized(COMPOSITES["small_cnn"]())
    with Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply() as sess:
        sess.dump_snapshot(tmp_path / "buyi.snapshot")
    with pytest.raises(XrtError) as e:
        Session.create_with_snapshot(
            tmp_path / "buyi.snapshot", [ZG330Backend, HostBackend], [zg330, None]
        )
    assert e.value.code == ErrorCode.LOAD_FAILED
    assert "compiled for target 'buyi'" in e.value.message and "'zg330' device" in e.value.message


def test_buyi_refuses_caller_placed_outputs(buyi: NpuDevice) -> None:
    from xrt import ErrorCode, XrtError

    model = COMPOSITES["small_cnn"]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=1)
    with Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply() as sess:
        outs = [Tensor(qnet.values[v]).malloc_on(buyi.default_mem_region()) for v in sess.outputs]
        with pytest.raises(XrtError) as e:
            sess.forward(feeds, outs)
        assert e.value.code == ErrorCode.WRONG_ORDER and "BuyiBackend" in e.value.message
        sess.forward(feeds)  # still fine without


def test_zg330_keeps_intermediates_on_chip_and_fills_caller_placed_outputs(
    zg330: NpuDevice,
) -> None:
    from xrt.backend import ZG330Backend

    model = COMPOSITES["small_cnn"]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=8)
    want = _host(qnet, feeds)
    with Session.create([ZG330Backend, HostBackend], qnet, [zg330, None]).apply() as sess:
        npu = sess.backends[0]
        run = next(u for u in sess.execution_units() if getattr(u, "op_ids", None))
        where = npu.placement(run.op_ids)
        prog = npu.program(run.op_ids)
        assert prog.intermediates and prog.ocm_bytes == prog.scratch_bytes
        assert where["ocm"] == "ocm" and "scratch" not in where, where
        assert all(where[f"intermediate:{p.name}"] == "ocm" for p in prog.intermediates)
        # Manual 1.3.2: outputs into tensors the caller placed (PL: plddr, PS: udma). In
        # the network's own layout the NPU's outputs are copied in, and the session says so.
        for region in ("plddr", "udma"):
            outs = [
                Tensor(qnet.values[v]).malloc_on(zg330.get_mem_region(region)) for v in sess.outputs
            ]
            got = sess.forward(feeds, outs)
            for t, w in zip(outs, want, strict=True):
                np.testing.assert_array_equal(t.numpy(), w)
            assert [g.chunk for g in got] == [t.chunk for t in outs]
            assert all(p.startswith("copied") for p in sess.output_paths().values())


def _ring_network(seed: int = 0) -> Network:
    """int8 [1, 24, 6, 6] -> 3x3 QConv2d -> QClip -> same type: a step that can be iterated."""
    rng = np.random.default_rng(seed)
    b = NetworkBuilder("ring")
    q = TensorType("SInt8", [1, 24, 6, 6], quant=QuantParams(0.05))
    x = b.input("x", q)
    (h,) = b.add(
        "QConv2d",
        [x],
        {"pads": [1, 1, 1, 1], "lo": -128, "hi": 127, "out_scale": 0.05},
        {
            "weight": b.param("w", rng.integers(-40, 40, (24, 24, 3, 3)).astype(np.int8)),
            "bias": b.param("b", rng.integers(-300, 300, 24).astype(np.int32)),
            "multiplier": b.param("m", rng.integers(1 << 13, 1 << 14, 24).astype(np.int32)),
            "shift": b.param("s", np.full(24, 22, np.int32)),
        },
        name="conv",
    )
    (y,) = b.add("QClip", [h], {"lo": -100, "hi": 100}, name="clip")
    return b.build([y])


def test_an_npu_alone_passes_the_input_and_output_ops_through(buyi: NpuDevice) -> None:
    """Without a host backend the Input and Output ops go to the first backend: Buyi
    passes them through as units of their own, and its one program holds ops 1 and 2."""
    from xrt.backend import Subgraph

    net = _ring_network()
    x = np.random.default_rng(2).integers(-128, 128, (1, 24, 6, 6)).astype(np.int8)
    with Session.create([BuyiBackend], net, [buyi]).apply() as sess:
        npu = sess.backends[0]
        assert all(b is npu for b in sess.backend_bindings().values())
        units = sess.execution_units()
        assert [u.op_ids if isinstance(u, Subgraph) else u.op_id for u in units] == [0, [1, 2], 3]
        (got,) = sess.forward({"x": x})
        np.testing.assert_array_equal(got.numpy(), _host(net, {"x": x})[0])
        assert npu.launches == [(1, 2)]
        (fed,) = sess.step_to(0, {"x": x})
        np.testing.assert_array_equal(fed.numpy(), x)
        (last,) = sess.step_to(3)
        np.testing.assert_array_equal(last.numpy(), got.numpy())


def test_zg330_engine_stores_outputs_into_caller_tensors_and_runs_a_ring_in_place(
    zg330: NpuDevice,
) -> None:
    """Manual 1.3.2 on ZG330: an output tensor in the engine's layout (channel-tiled by 16)
    in plddr or udma gets the program's last STOREs directly (its base register points at
    it); the manual's ring network feeds one tensor as input and output, forward after
    forward. Each result equals HostBackend's."""
    from xrt.backend import ZG330Backend
    from xrt.tensor import ChannelTiled

    net = _ring_network()
    ttype = TensorType("SInt8", [1, 24, 6, 6], "NCHW", QuantParams(0.05))
    x0 = np.random.default_rng(1).integers(-128, 128, (1, 24, 6, 6)).astype(np.int8)
    with Session.create([ZG330Backend, HostBackend], net, [zg330, None]).apply() as sess:
        bound = sess.backend_bindings()
        assert all(bound[op.op_id].is_type(ZG330Backend) for op in net.ops[1:-1])
        assert bound[0].is_type(HostBackend) and bound[net.op_ids[-1]].is_type(HostBackend)
        for region in ("plddr", "udma"):
            out = Tensor(ttype, hw_layout=ChannelTiled(16)).malloc_on(zg330.get_mem_region(region))
            (got,) = sess.forward({"x": x0}, [out])
            assert got is out
            (path,) = sess.output_paths().values()
            assert path.startswith("written by the engine") and region in path, path
            np.testing.assert_array_equal(out.numpy(), _host(net, {"x": x0})[0])
        # The ring: the same tensor is the input and the output, three times over.
        ring = Tensor(ttype, hw_layout=ChannelTiled(16)).malloc_on(zg330.get_mem_region("plddr"))
        ring.copy_data(x0)
        want = x0
        for _ in range(3):
            sess.forward([ring], [ring])
            want = _host(net, {"x": want})[0]
            assert next(iter(sess.output_paths().values())).startswith("written by the engine")
            np.testing.assert_array_equal(ring.numpy(), want)


def test_zg330_dumps_on_chip_intermediates_of_a_merged_program_and_steps_into_it(
    zg330: NpuDevice, tmp_path: Path
) -> None:
    """Manual 1.4.3: with merging on, the intermediates a ZG330 program keeps in the OCM are
    dumped too, read back through the OCM's MemRegion; step_to reaches an operator inside
    the merged program. Every value equals the host's."""
    from xrt.backend import ZG330Backend

    model = COMPOSITES["small_cnn"]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=6)
    everything = run_reference(qnet, feeds)
    with Session.create([ZG330Backend, HostBackend], qnet, [zg330, None]).apply() as sess:
        npu = sess.backends[0]
        run = next(u for u in sess.execution_units() if len(getattr(u, "op_ids", ())) > 2)
        sess.set_dump_outputs(True, str(tmp_path), "SQB")
        sess.forward(feeds)
        prog, where = npu.program(run.op_ids), npu.placement(run.op_ids)
        inside = [p for p in prog.intermediates if "#" not in p.name]
        assert inside and {where[f"intermediate:{p.name}"] for p in inside} == {"ocm"}
        for p in inside:
            op_id = next(op.op_id for op in qnet.ops if p.name in op.outputs)
            (path,) = tmp_path.glob(f"{op_id}_*.sqb")
            dumped = np.fromfile(path, np.int8).reshape(p.shape)
            np.testing.assert_array_equal(dumped, everything[p.name], err_msg=p.name)
        sess.set_dump_outputs(False)
        middle = qnet.op(run.op_ids[len(run.op_ids) // 2])
        (got,) = sess.step_to(middle.op_id, feeds)
        np.testing.assert_array_equal(got.numpy(), everything[middle.outputs[0]])


def test_a_faulting_program_is_11014_and_the_device_stays_usable(buyi: NpuDevice) -> None:
    """A HardOp whose program reads outside every memory: ADDR_RANGE, then a good run."""
    import dataclasses

    from xrt import ErrorCode, XrtError
    from xrt.backend.npu import program_from_bytes, program_to_bytes
    from xrt.hw import isa

    good = manual_network()
    hard = good.op(3)
    prog = program_from_bytes(np.asarray(good.params[hard.params["program"]]).tobytes())
    k = next(i for i, insn in enumerate(prog.instructions) if isinstance(insn, isa.Load))
    broken = list(prog.instructions)
    broken[k] = broken[k].replace(offset=0xFFFF_FF00)
    bad_prog = dataclasses.replace(prog, instructions=broken)
    params = dict(good.params)
    params[hard.params["program"]] = np.frombuffer(program_to_bytes(bad_prog), np.uint8).copy()
    bad = Network(list(good.ops), dict(good.values), good.inputs, good.outputs, params, "bad")
    sess = Session.create([BuyiBackend, HostBackend], bad, [buyi, None]).apply()
    with sess, pytest.raises(XrtError) as e:
        sess.forward([_x()])
    err = e.value
    assert err.code == ErrorCode.DEVICE_INTERNAL
    assert "ADDR_RANGE" in err.message and f"instruction {k}" in err.message
    assert "load unit" in err.message and "HardOp" in err.message
    with Session.create([BuyiBackend, HostBackend], good, [buyi, None]).apply() as sess:
        _assert_same(sess.forward([_x()]), _host(manual_float(), {"x": _x()}))


def test_log_io_and_time_mark_merged_programs(
    buyi: NpuDevice, caplog: pytest.LogCaptureFixture
) -> None:
    model = COMPOSITES["small_cnn"]()
    qnet = _quantized(model)
    with Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply() as sess:
        sess.set_log_io(True)
        sess.set_log_time(True)
        sess.enable_time_profile(True)
        with caplog.at_level("INFO", logger="xrt.session"):
            sess.forward(random_feeds(model, seed=2))
        merged = [r.getMessage() for r in caplog.records if "HardOp (Merged)" in r.getMessage()]
        assert merged and any("wall" in m for m in merged)
        results = sess.time_profile_results().values()
        programs = [t for t in results if t.backend == "BuyiBackend" and t.op_type == "Subgraph"]
        compiled = [t for t in programs if any(qnet.op(i).op_type != "Cast" for i in t.op_ids)]
        assert compiled and all(t.hardware > 0 for t in compiled)


def test_engine_counters_describe_the_launch(buyi: NpuDevice) -> None:
    """The counters of a launch agree with its program: instructions retired per unit,
    GEMM cycles within the run, and the hardware time the profile reports."""
    from collections import Counter

    from xrt.backend.npu import program_from_bytes
    from xrt.hw import isa

    network = manual_network()
    prog = program_from_bytes(np.asarray(network.params[network.op(3).params["program"]]).tobytes())
    units = Counter(
        isa.unit_of(insn).name for insn in prog.instructions if isa.unit_of(insn) is not None
    )
    with Session.create([BuyiBackend, HostBackend], network, [buyi, None]).apply() as sess:
        sess.enable_time_profile(True)
        sess.forward([_x()])
        stats = sess.backends[0].last_stats
        assert stats is not None
        assert stats.counters["LOAD_RETIRED"] == units["LOAD"]
        assert stats.counters["COMPUTE_RETIRED"] == units["COMPUTE"]
        assert stats.counters["STORE_RETIRED"] == units["STORE"]
        assert 0 < stats.gemm_cycles <= stats.busy_cycles <= (stats.cycles or 0)
        hard = sess.time_profile_results()[3]
        assert hard.hardware == pytest.approx(stats.seconds * 1e3)
        # A second launch counts itself alone (START clears the counters).
        first = dict(stats.counters)
        sess.forward([_x()])
        assert sess.backends[0].last_stats.counters == first


def test_xrt_run_on_the_emulator_prints_placement_profile_and_utilisation(
    buyi_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``xrt run MODEL --device grpc://... --backends buyi,host --quantize --calib-dir``."""
    import onnx

    from xrt.cli import main

    model = COMPOSITES["small_cnn"]()
    path = tmp_path / "small_cnn.onnx"
    onnx.save(model, path)
    calib = tmp_path / "calib"
    calib.mkdir()
    for s in range(3):
        np.save(calib / f"{s}.npy", random_feeds(model, seed=s)["x"])
    trace = tmp_path / "trace.json"
    argv = ["run", str(path), "--device", buyi_url, "--backends", "buyi,host", "--quantize"]
    argv += ["--calib-dir", str(calib), "--profile", "--trace", str(trace)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "HardOp (Merged)" in out and "on BuyiBackend" in out and "on HostBackend" in out
    assert "MAC array busy" in out and "BuyiBackend" in out.split("time profile")[1]
    events = json.loads(trace.read_text())["traceEvents"]
    lanes = {e["args"]["name"] for e in events
             if e["name"] == "thread_name"}  # fmt: skip
    assert {"npu.engine", "npu.dma", "host"} <= lanes


def _wide_chain(c: int = 16, hw: int = 176, seed: int = 0) -> Network:
    """x -> five 1x1 convolutions (the third and fifth with stride 2): intermediates of
    484 KB, 484 KB, 121 KB and 121 KB, 1.2 MB one after another, at most 968 KB live."""
    rng = np.random.default_rng(seed)
    b = NetworkBuilder("wide_chain")
    y = b.input("x", TensorType("SInt8", [1, c, hw, hw], quant=QuantParams(0.05)))
    for i, s in enumerate((1, 1, 2, 1, 2)):
        (y,) = b.add(
            "QConv2d",
            [y],
            {"strides": [s, s], "lo": -128, "hi": 127, "out_scale": 0.05},
            {
                "weight": b.param(f"w{i}", rng.integers(-40, 40, (c, c, 1, 1)).astype(np.int8)),
                "bias": b.param(f"b{i}", rng.integers(-300, 300, c).astype(np.int32)),
                "multiplier": b.param(f"m{i}", rng.integers(1 << 13, 1 << 14, c).astype(np.int32)),
                "shift": b.param(f"s{i}", np.full(c, 19, np.int32)),
            },
            name=f"conv{i}",
        )
    return b.build([y])


def test_intermediates_that_fit_the_ocm_only_when_sharing_memory_live_on_chip(
    buyi: NpuDevice, zg330: NpuDevice
) -> None:
    """The memory planner on the device: a chain whose intermediates need 1.2 MB one after
    another, more than the 1 MiB OCM, shares memory by lifetime and keeps all of them on the
    ZG330's chip, its weights too; Buyi keeps everything in plddr. Both are bit-exact
    against HostBackend, and the ZG330's engine needs far fewer cycles: the OCM reads and
    writes a beat each per cycle, a DDR model one beat in all (`ddr_shared_bus`)."""
    from xrt.backend import ZG330Backend

    net = _wide_chain()
    x = np.random.default_rng(1).integers(-128, 128, (1, 16, 176, 176)).astype(np.int8)
    want = _host(net, {"x": x})
    cycles = {}
    for cls, dev in ((BuyiBackend, buyi), (ZG330Backend, zg330)):
        with Session.create([cls, HostBackend], net, [dev, None]).apply() as sess:
            _assert_same(sess.forward({"x": x}), want)
            npu = sess.backends[0]
            (ids,) = set(npu.launches)
            prog, where = npu.program(ids), npu.placement(ids)
            assert len(prog.intermediates) == 4
            home = {where[f"intermediate:{p.name}"] for p in prog.intermediates}
            unshared = sum(p.nbytes for p in prog.intermediates)
            if cls is ZG330Backend:
                assert unshared > zg330.get_mem_region("ocm").size >= prog.ocm_bytes
                assert home == {"ocm"} and prog.ocm_bytes == prog.scratch_bytes < unshared
                assert where["constants"] == "ocm"
            else:
                assert home == {"plddr"} and prog.ocm_bytes == 0
                assert where["constants"] == "plddr"
            assert npu.last_stats is not None
            cycles[cls] = npu.last_stats.busy_cycles
    # Each conv streams its input in and its output out at once: one DDR data bus moves
    # those beats one after the other, the OCM both ways each cycle (measured: 108,326
    # engine cycles against 185,904, 42% fewer). Simulated cycles are deterministic.
    assert cycles[ZG330Backend] * 4 < cycles[BuyiBackend] * 3, (
        f"ZG330 with every tensor on chip is not 25% faster than Buyi: {cycles}"
    )
