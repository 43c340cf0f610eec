"""The AIC100 runtime's names `xrt.aic` took last (``QpcFile``, ``getBufferMappingsDma``,
``getIoDescriptor``, ``QpcConstantsInfo``, ``isPartialBufferAllowed``, ``devMapping``,
``numThreadsPerQueue``), against real ``npu-emu serve`` processes where a device is
involved; every result equal to HostBackend's on the same network."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import random_feeds
from onnx_zoo import COMPOSITES

from npuemu.server.launch import ServerProcess
from xrt import Device, ErrorCode, Tensor, TensorType, XrtError
from xrt.aic import (
    BufferMapping,
    Context,
    InferenceSet,
    InferenceSetProperties,
    Qpc,
    QpcFile,
)
from xrt.backend import HostBackend, ZG330Backend
from xrt.backend.npu import NpuBackend, program_from_bytes
from xrt.dtypes import QuantParams
from xrt.layout import ChannelTiled
from xrt.network import Network, NetworkBuilder
from xrt.npu_device import NpuDevice
from xrt.quant import quantize_network
from xrt.session import Session
from xrt.session.container import compile_container

pytestmark = pytest.mark.sim


def raises(code: ErrorCode, match: str | None = None) -> pytest.RaisesExc:  # type: ignore[type-arg]
    return pytest.raises(XrtError, match=match, check=lambda e: e.code == code)


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return COMPOSITES["small_cnn"]()


@pytest.fixture(scope="module")
def qnet(model) -> Network:  # type: ignore[no-untyped-def]
    return quantize_network(Network.from_onnx(model), [random_feeds(model, seed=s) for s in (0, 1)])


@pytest.fixture(scope="module")
def folder(qnet: Network, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """A folder holding the network compiled for Buyi as ``programqpc.bin``."""
    where = tmp_path_factory.mktemp("qpc")
    compile_container(qnet, "buyi", where / "programqpc.bin")
    return where


def host(net: Network, inputs: list[np.ndarray]) -> list[np.ndarray]:
    with Session.create([HostBackend], net).apply() as sess:
        return [t.numpy() for t in sess.forward(inputs)]


def int8_network(seed: int = 0) -> Network:
    """int8 in, int8 out: a 3x3 QConv2d to 24 channels and a QClip (ZG330 stores it)."""
    rng = np.random.default_rng(seed)
    b = NetworkBuilder("int8_io")
    x = b.input("x", TensorType("SInt8", [1, 24, 6, 6], quant=QuantParams(0.05)))
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


# -- the container's file, I/O descriptor and constants -------------------------------------


def test_qpc_file_loads_a_base_path_and_file_name(folder: Path) -> None:
    qf = QpcFile(folder)
    assert qf.path == folder / "programqpc.bin"
    with raises(ErrorCode.WRONG_ORDER, "load"):
        qf.get_buffer()
    assert qf.load() is qf
    data = (folder / "programqpc.bin").read_bytes()
    assert qf.get_buffer() == qf.data() == data and qf.size == len(data)
    assert qf.qpc() == Qpc.from_file(folder / "programqpc.bin")
    with raises(ErrorCode.FILE_NOT_FOUND):
        QpcFile(folder, "other.bin").load()
    with raises(ErrorCode.WRONG_TYPE):
        QpcFile(folder, "../programqpc.bin")


def test_io_descriptor_and_constants_describe_the_container(folder: Path, qnet: Network) -> None:
    qpc = Qpc.from_file(folder / "programqpc.bin")
    doc = json.loads(qpc.io_descriptor())
    assert [BufferMapping.from_dict(b) for b in doc["buffers"]] == qpc.buffer_mappings()
    constants = qpc.info().constants
    assert [c.index for c in constants] == list(range(len(constants)))
    programs = [c for c in constants if c.name.startswith("program_")]
    assert programs and len(programs) == qpc.info().npu_programs
    # Each program's constants are the bytes its program carries (weights, requantization).
    for c in programs:
        member = next(
            e["state"][c.name] for e in qpc._contents.manifest["backends"] if c.name in e["state"]
        )
        blob = qpc._contents.blobs[member]
        assert c.size == len(program_from_bytes(blob, c.name).constants) > 0
    host = [c for c in constants if not c.name.startswith("program_")]
    assert all(c.size == qnet.params[c.name].nbytes for c in host)
    assert qpc.info().to_dict()["constants"][0]["name"] == constants[0].name


def test_a_fixed_size_buffer_takes_no_partial_buffer(
    folder: Path,
    model,
    buyi_server: ServerProcess,  # type: ignore[no-untyped-def]
) -> None:
    qpc = Qpc.from_file(folder / "programqpc.bin")
    assert not any(b.is_partial_buffer_allowed for b in qpc.buffer_mappings())
    assert BufferMapping("y", 1, "out", 0, "FP32", (-1, 4)).is_partial_buffer_allowed
    x = list(random_feeds(model, seed=3).values())
    with Context([f"{buyi_server.url}/npu0"]) as ctx, InferenceSet(ctx, qpc) as iset:
        handle = iset.get_available(timeout=60)
        with raises(ErrorCode.OUT_OF_RANGE, "shape"):
            handle.set_buffers([x[0].reshape(-1)[: x[0].size // 2], *x[1:]])


# -- getBufferMappingsDma: buffers as device memory holds them --------------------------------


@pytest.fixture
def zg330(zg330_server: ServerProcess) -> Iterator[NpuDevice]:
    dev = Device.open(zg330_server.url)
    assert isinstance(dev, NpuDevice)
    yield dev
    dev.close()


def test_dma_mappings_are_the_buffers_the_engine_writes(
    zg330: NpuDevice, folder: Path, tmp_path: Path
) -> None:
    """ZG330: an int8 output of an NPU program in device memory is the engine's channel
    tiles; a buffer as the DMA mapping describes it is written by the engine itself."""
    net = int8_network()
    compile_container(net, "zg330", tmp_path / "int8.qpc")
    qpc = Qpc.from_file(tmp_path / "int8.qpc")
    (x_map, y_map) = qpc.buffer_mappings()
    (x_dma, y_dma) = qpc.buffer_mappings_dma()
    assert x_dma == x_map  # inputs are copied in
    assert (y_dma.hw_layout, y_map.size, y_dma.size) == ("C16", 24 * 36, 32 * 36)
    ttype = TensorType("SInt8", list(y_dma.shape), "NCHW", net.values[y_dma.name].quant)
    x = np.random.default_rng(2).integers(-128, 128, x_map.shape).astype(np.int8)
    with qpc.create_session(zg330) as sess:
        bindings = sess.backend_bindings()
        boundary = {net.input_op().op_id, net.output_op().op_id}  # on the host: they pass
        assert all(b.is_type(ZG330Backend) for i, b in bindings.items() if i not in boundary)
        y = Tensor(ttype, hw_layout=ChannelTiled(16)).malloc_on(zg330.get_mem_region("udma"))
        assert y.nbytes == y_dma.size
        sess.forward([x], [y])
        (path,) = sess.output_paths().values()
        assert path.startswith("written by the engine"), path
        np.testing.assert_array_equal(y.numpy(), host(net, [x])[0])
    # Buyi copies every output: its DMA buffers are the heap's.
    buyi = Qpc.from_file(folder / "programqpc.bin")
    assert buyi.buffer_mappings_dma() == buyi.buffer_mappings()


# -- devMapping and numThreadsPerQueue -------------------------------------------------------


def test_dev_mapping_names_the_devices_the_activations_run_on(
    folder: Path, buyi_server: ServerProcess
) -> None:
    qpc = Qpc.from_file(folder / "programqpc.bin")
    url = buyi_server.url
    with Context([f"{url}/npu0", f"{url}/npu1"]) as ctx:
        props = InferenceSetProperties(dev_mapping=("npu1",))
        with InferenceSet(ctx, qpc, properties=props) as iset:
            assert iset.devices == ["npu1"]
        with raises(ErrorCode.WRONG_TYPE, "npu7"):
            InferenceSet(ctx, qpc, properties=InferenceSetProperties(dev_mapping=("npu7",)))
        with raises(ErrorCode.OUT_OF_RANGE, "2 device"):
            InferenceSet(ctx, qpc, properties=InferenceSetProperties(dev_mapping=("npu0", "npu1")))
        with InferenceSet(ctx, qpc, num_activations=2) as iset:  # nothing stayed claimed
            assert sorted(iset.devices) == ["npu0", "npu1"]


def test_a_queues_threads_share_one_device(
    folder: Path,
    model,
    qnet: Network,
    buyi_server: ServerProcess,  # type: ignore[no-untyped-def]
) -> None:
    """Two threads on one activation: each runs inferences in a session of its own at the
    same time as the other (both must be inside a run to pass the barrier), their NPU
    programs taking turns on the device; every result is the host's."""
    qpc = Qpc.from_file(folder / "programqpc.bin")
    inputs = [list(random_feeds(model, seed=40 + i).values()) for i in range(4)]
    want = [host(qnet, x) for x in inputs]
    both = threading.Barrier(2, timeout=120)
    props = InferenceSetProperties(num_threads_per_queue=2)
    with (
        Context([f"{buyi_server.url}/npu0"]) as ctx,
        InferenceSet(ctx, qpc, set_size=4, properties=props) as iset,
    ):
        sessions = [iset.session(0, t) for t in (0, 1)]
        assert sessions[0] is not sessions[1]
        arrived: set[str] = set()

        def first_unit_meets_the_other_thread(*_: object) -> None:
            me = threading.current_thread().name
            if me not in arrived:  # each queue thread once, in its first run
                arrived.add(me)
                both.wait()

        for s in sessions:
            s.set_pre_callback(first_unit_meets_the_other_thread)
        handles = [iset.submit(x) for x in inputs]
        iset.wait_for_completion(timeout=300)
        for h, w in zip(handles, want, strict=True):
            assert h.ok, h.error
            for got, exp in zip(h.outputs(), w, strict=True):
                np.testing.assert_array_equal(got, exp)
        launched = [
            len(next(b for b in s.backends if isinstance(b, NpuBackend)).launches) for s in sessions
        ]
        assert all(n > 0 for n in launched), launched
    with (
        pytest.raises(XrtError, match="num_threads_per_queue"),
        Context([f"{buyi_server.url}/npu0"]) as ctx,
    ):
        InferenceSet(ctx, qpc, properties=InferenceSetProperties(num_threads_per_queue=0))
