"""The examples of the Icraft XRT manual's Session chapters, done with xrt.

Source: a public copy of the manual's XRT page (``Icraft文档/component/XRT`` in the
silence-breaker/TDPU repository): section 1.1 (creating a session by priority, by order,
with bound backends), 1.3 (forward, forward into given outputs, stepTo dumping every
operator's output), 1.4 (setLogIO, setLogTime, setDumpOutputs, callbacks) and 2.8
(enableTimeProfile). Its BuyiBackend is played by `tinynpu.TinyNpuBackend`, its device
``Device()`` by the host device (or the in-memory ``mem://`` board where memory on a
device matters), its quantized SSD by quantized composite networks. Each test asserts
the outcome the manual states.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from netutil import random_feeds
from onnx_zoo import COMPOSITES
from tinynpu import TinyNpuBackend, manual_network, reference_twin

from xrt import Device, HostDevice, Tensor
from xrt.backend import Backend, HostBackend
from xrt.network import Network, run_network_reference
from xrt.quant import calibrate, quantize_network
from xrt.session import OpTime, Session
from xrt.testing.memory_transport import MemoryDevice

# The manual's expected bindings for Input -> Conv2d -> Cast -> HardOp -> Cast -> ReLU ->
# MaxPool2d -> Output with sess = Session.Create([BuyiBackend, HostBackend], ...).
MANUAL_BINDINGS = {
    0: HostBackend,  # Input
    1: HostBackend,  # Conv2d
    2: HostBackend,  # Cast
    3: TinyNpuBackend,  # HardOp
    4: TinyNpuBackend,  # Cast
    5: HostBackend,  # ReLU
    6: HostBackend,  # MaxPool2d
    7: HostBackend,  # Output
}


def _x(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)


def _assert_manual_bindings(sess: Session) -> None:
    bindings = sess.backend_bindings()
    assert sorted(bindings) == sorted(MANUAL_BINDINGS)
    for op_id, cls in MANUAL_BINDINGS.items():
        assert bindings[op_id].is_type(cls), (op_id, bindings[op_id])


@pytest.fixture(scope="module")
def quantized() -> Network:
    """Stands in for the manual's ``ssd300_quantized.json``: a quantized composite CNN."""
    model = COMPOSITES["small_cnn"]()
    net = Network.from_onnx(model)
    samples = [random_feeds(model, seed=s) for s in range(4)]
    return quantize_network(net, ranges=calibrate(net, samples))


@pytest.fixture
def board() -> Iterator[MemoryDevice]:
    """Stands in for ``Device::Open("axi://ql100aiu?npu=0x40000000&dma=0x80000000")``."""
    import xrt.testing.memory_transport  # noqa: F401 - registers mem://

    dev = Device.open("mem://ql100aiu?npu=0x40000000&dma=0x80000000")
    assert isinstance(dev, MemoryDevice)
    yield dev
    dev.close()


def test_create_by_priority_example() -> None:
    """1.1.1: ``Session.Create([BuyiBackend, HostBackend], network.view(0), devices)``."""
    network = manual_network()
    sess = Session.create(
        [TinyNpuBackend, HostBackend], network.view(0), [HostDevice.default(), None]
    )
    sess.apply()
    _assert_manual_bindings(sess)
    npu, host = sess.backends
    assert npu.is_type(TinyNpuBackend) and host.is_type(HostBackend)
    assert npu.network_view is not None and npu.network_view.op_ids == [3, 4]
    assert host.network_view is not None and host.network_view.op_ids == [0, 1, 2, 5, 6, 7]
    # And it computes what the host alone computes with the program as a lookup op.
    (out,) = sess.forward([_x()])
    (ref,) = run_network_reference(reference_twin(network), [_x()])
    np.testing.assert_array_equal(out.numpy(), ref)


def test_create_by_order_example() -> None:
    """1.1.1: ``Session.CreateByOrder(network.view(0), [BuyiBackend.Init(), ...], devices)``."""
    network = manual_network()
    npu, host = TinyNpuBackend(), HostBackend()
    sess = Session.create_by_order(
        network.view(0), [npu, host], [HostDevice.default(), HostDevice.default()]
    )
    sess.apply()
    _assert_manual_bindings(sess)
    assert sess.backends[0] is npu and sess.backends[1] is host
    assert sess.backend_bindings()[3] is npu


def test_create_with_backends_example() -> None:
    """1.1.2: backends bound with ``Backend.Create(T, network.view([...]), device)``."""
    network = manual_network()
    host = HostBackend.create(network.view([0, 1, 2, 5, 6, 7]), HostDevice.default())
    npu = TinyNpuBackend.create(network.view([3, 4]), HostDevice.default())
    sess = Session.create_with_backends(network.view(0), [host, npu])
    sess.apply()
    _assert_manual_bindings(sess)
    assert sess.backend_bindings()[1] is host and sess.backend_bindings()[4] is npu
    (out,) = sess.forward([_x(3)])
    (ref,) = run_network_reference(reference_twin(network), [_x(3)])
    np.testing.assert_array_equal(out.numpy(), ref)


def test_forward_example(quantized: Network) -> None:
    """1.3.1: ``Session::Create<HostBackend>``, apply, forward({input_tensor})."""
    sess = Session.create([HostBackend], quantized, [HostDevice.default()])
    sess.apply()
    x = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    input_tensor = Tensor.from_numpy(x)
    outputs = sess.forward([input_tensor])
    ref = run_network_reference(quantized, [x])
    assert len(outputs) == len(ref)
    for t, r in zip(outputs, ref, strict=True):
        assert t.is_on(HostDevice.default_region())
        np.testing.assert_array_equal(t.numpy(), r)  # the integer arithmetic, exactly


def test_forward_into_given_outputs_example(quantized: Network, board: MemoryDevice) -> None:
    """1.3.2: outputs written to caller-given tensors, here in device memory (plddr)."""
    sess = Session.create([HostBackend], quantized)
    sess.apply()
    given = []
    for name in sess.outputs:
        ttype = quantized.values[name]
        chunk = board.default_mem_region().malloc(ttype.bytes(), True, 4096)
        given.append(Tensor(ttype, chunk, 0))
    x = np.random.default_rng(6).standard_normal((1, 3, 32, 32)).astype(np.float32)
    returned = sess.forward([x], given)
    assert all(a is b for a, b in zip(returned, given, strict=True))
    for t, r in zip(given, run_network_reference(quantized, [x]), strict=True):
        assert t.is_on(board.default_mem_region())
        np.testing.assert_array_equal(t.numpy(), r)


def test_step_to_dump_example(quantized: Network, tmp_path: Path) -> None:
    """1.3.3: stepTo every op in turn, dumping each output with "SQB"; each op runs once."""
    sess = Session.create([HostBackend], quantized, [HostDevice.default()])
    sess.apply()
    runs: Counter[int] = Counter()
    sess.set_post_callback(lambda s, op, backend, outs: runs.update([op.op_id]))
    x = np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)
    input_tensor = Tensor.from_numpy(x)
    dump_dir = tmp_path / "dumps.SQB"
    dump_dir.mkdir()
    for op in sess.network_view.ops:
        output_tensors = sess.step_to(op.op_id, [input_tensor])
        # The Output op has no outputs of its own: it yields the network's outputs.
        yields = op.inputs if op.op_type == "Output" else op.outputs
        assert len(output_tensors) == len(yields)
        for value, tensor in zip(op.outputs, output_tensors, strict=False):
            with open(dump_dir / f"{op.op_id}_{value.replace(':', '_')}.ftmp", "wb") as f:
                tensor.dump(f, "SQB", fallback=True)  # float values fall back to SFB
    assert runs == Counter(quantized.op_ids)  # continued from the last position each time
    everything = run_network_reference(quantized, [x], return_all=True)
    assert isinstance(everything, dict)
    for op in quantized.ops:
        for value in op.outputs:
            want = everything[value]
            got = np.fromfile(dump_dir / f"{op.op_id}_{value.replace(':', '_')}.ftmp", want.dtype)
            np.testing.assert_array_equal(got, want.reshape(-1))
    assert sum(1 for _ in dump_dir.iterdir()) == sum(len(op.outputs) for op in quantized.ops)


def test_log_io_and_log_time_example(caplog: pytest.LogCaptureFixture) -> None:
    """1.4.1 / 1.4.2: a line per op with its inputs and outputs, and one with its times."""
    network = manual_network()
    sess = Session.create([TinyNpuBackend, HostBackend], network)
    sess.apply()
    sess.set_log_io(True)
    sess.set_log_time(True)
    with caplog.at_level(logging.INFO, logger="xrt.session"):
        sess.forward([_x()])
    lines = [r.getMessage() for r in caplog.records if r.name == "xrt.session"]
    io = [m for m in lines if "-> outputs" in m]
    times = [m for m in lines if "wall" in m]
    # Seven units: ops 0 (Input), 1, 2, the merged subgraph [3, 4] (the manual's "HardOp
    # (Merged)"), 5, 6, 7 (Output).
    assert len(io) == len(times) == 7
    assert io[0].startswith("op 0 (Input) on HostBackend: inputs - -> outputs x:FP32[1, 3, 8, 8]")
    assert io[1].startswith("op 1 (Conv2d 'conv') on HostBackend: inputs x:FP32[1, 3, 8, 8]")
    assert "subgraph [3, 4] (HardOp, Cast) on TinyNpuBackend" in io[3]
    assert io[-1].startswith("op 7 (Output) on HostBackend: inputs pool:FP32[1, 4, 4, 4]")
    assert io[-1].endswith("-> outputs -")
    assert "min=" in io[1] and "max=" in io[1]
    assert all("memory" in m and "hardware" in m for m in times)


def test_dump_outputs_example(tmp_path: Path) -> None:
    """1.4.3: ``setDumpOutputs(true, "./", "HQB")``: every output saved after each layer."""
    network = manual_network()
    sess = Session.create([TinyNpuBackend, HostBackend], network)
    sess.backends[0].auto_merge = False  # the manual: turn merging off to dump every layer
    sess.apply()
    sess.set_dump_outputs(True, tmp_path / "dump", "HQB")
    x = _x(2)
    sess.forward([x])
    everything = run_network_reference(reference_twin(network), [x], return_all=True)
    assert isinstance(everything, dict)
    names = sorted(os.listdir(tmp_path / "dump"))
    # No tensor has a hardware layout (H -> S); float values cannot give Q (Q -> F).
    assert names == sorted(
        [
            "0_x.sfb",  # the Input op's outputs: the input as fed
            "1_conv.sfb",
            "2_quantize.sqb",
            "3_npu_program.sqb",
            "4_dequantize.sfb",
            "5_relu.sfb",
            "6_pool.sfb",
        ]
    )
    for name in names:
        value = next(v for op in network.ops for v in op.outputs if name.startswith(f"{op.op_id}_"))
        want = everything[value]
        np.testing.assert_array_equal(
            np.fromfile(tmp_path / "dump" / name, want.dtype), want.ravel()
        )


def test_callbacks_example() -> None:
    """1.4.4: pre and post callbacks around each layer see the op and its tensors."""
    network = manual_network()
    sess = Session.create([TinyNpuBackend, HostBackend], network)
    sess.backends[0].auto_merge = False
    sess.apply()
    seen: list[tuple[str, int, list[np.ndarray]]] = []

    def pre_func(s: Session, op: object, backend: Backend, inputs: list[Tensor]) -> None:
        assert s is sess and backend is sess.backend_bindings()[op.op_id]  # type: ignore[attr-defined]
        seen.append(("before", op.op_id, [t.numpy() for t in inputs]))  # type: ignore[attr-defined]

    def post_func(s: Session, op: object, backend: Backend, outputs: list[Tensor]) -> None:
        seen.append(("after", op.op_id, [t.numpy() for t in outputs]))  # type: ignore[attr-defined]

    sess.set_pre_callback(pre_func)
    sess.set_post_callback(post_func)
    x = _x(4)
    sess.forward([x])
    assert [(w, i) for w, i, _ in seen] == [
        (w, i) for i in range(0, 8) for w in ("before", "after")
    ]
    everything = run_network_reference(reference_twin(network), [x], return_all=True)
    assert isinstance(everything, dict)
    for when, op_id, arrays in seen:
        op = network.op(op_id)
        names = op.inputs if when == "before" else op.outputs  # Input: () -> x; Output: m -> ()
        for name, arr in zip(names, arrays, strict=True):
            np.testing.assert_array_equal(arr, everything[name])


def test_time_profile_example() -> None:
    """2.8: ``enableTimeProfile(true)``: per op (wall, mem, hard, other); total time always."""
    network = manual_network()
    sess = Session.create([TinyNpuBackend, HostBackend], network)
    sess.apply()
    sess.forward([_x()])
    assert sess.total_time() > 0  # measured without profiling
    assert sess.time_profile_results() == {}
    sess.enable_time_profile(True)
    sess.forward([_x()])
    results = sess.time_profile_results()
    # Every op, the Input and Output ops too; the subgraph [3, 4] is filed under op 3.
    assert list(results) == [0, 1, 2, 3, 5, 6, 7]
    for op_id, result in results.items():
        assert isinstance(result, OpTime)
        wall, mem, hard, other = result
        assert min(wall, mem, hard, other) >= 0
        assert other == pytest.approx(max(0.0, wall - mem - hard))
        backend: Backend = sess.backend_bindings()[op_id]
        if backend.is_host:
            assert hard == 0  # the host has no hardware time
        else:
            assert result.op_ids == (3, 4) and result.op_type == "Subgraph" and hard > 0
    assert sess.total_time("ms") >= sum(r.wall for r in results.values())  # ms, as printed
    assert sess.total_time("ms") == pytest.approx(sess.total_time() * 1e3)
    table = sess.profile_table()
    assert "Subgraph" in table and "TinyNpuBackend" in table and "total" in table
