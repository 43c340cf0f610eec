"""The manual's session behaviours on a simulated NPU, and the other seeds' (real processes,
RTL engine; every result equal to `HostBackend`'s on the same network):

- 1.4.3 ``setDumpOutputs(true, "./", "HQB")``: an NPU's values dumped as its engine stores
  them (channel tiles), the host's in their logical layout;
- ZG330's OCM optimisation as a switch, and 1.1.3: a snapshot's switches win;
- the MMU mode, which this NPU has no way to turn off;
- MindSpore Lite's delegate ``Init`` answering ``RET_NOT_SUPPORT``: the NPU backend left out,
  its operators on the host;
- OneFlow XRT's ``Run(..., block_until_done=false)``: a forward that goes on meanwhile.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import random_feeds
from onnx_zoo import COMPOSITES

from npuemu.server.launch import ServerProcess
from xrt import Device, ErrorCode, HostDevice, TensorType, XrtError
from xrt.backend import BuyiBackend, HostBackend, ZG330Backend
from xrt.layout import ChannelTiled
from xrt.manual.example import generate_network
from xrt.network import Network
from xrt.npu_device import NpuDevice
from xrt.quant import quantize_network
from xrt.session import Session, SessionRun

pytestmark = pytest.mark.sim


def raises(code: ErrorCode, match: str | None = None) -> pytest.RaisesExc:  # type: ignore[type-arg]
    return pytest.raises(XrtError, match=match, check=lambda e: e.code == code)


def small_cnn() -> tuple[Network, dict[str, np.ndarray]]:
    model = COMPOSITES["small_cnn"]()
    net = quantize_network(Network.from_onnx(model), [random_feeds(model, seed=s) for s in (0, 1)])
    return net, random_feeds(model, seed=7)


def on_host(net: Network, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with Session.create([HostBackend], net).apply() as sess:
        return [t.numpy() for t in sess.forward(feeds)]


@pytest.fixture
def buyi(open_buyi: Callable[..., NpuDevice]) -> NpuDevice:
    return open_buyi()


@pytest.fixture
def zg330(zg330_server: ServerProcess) -> Iterator[NpuDevice]:
    dev = Device.open(zg330_server.url)
    assert isinstance(dev, NpuDevice)
    yield dev
    dev.close()


# -- 1.4.3: setDumpOutputs with HQB --------------------------------------------------------


def test_hqb_dumps_the_npus_values_as_its_engine_stores_them(
    buyi: NpuDevice, tmp_path: Path
) -> None:
    """The manual's network with ``setDumpOutputs(true, "./", "HQB")``: the HardOp's output
    is written as the engine's int8 channel tiles (NCHW, 16 channels a block), the host's
    values, which have no hardware layout, in the software layout (SQB)."""
    network = generate_network()
    x = np.random.default_rng(3).standard_normal(network.input_types()[0].shape)
    x = x.astype(np.float32)
    hq, sq = tmp_path / "hqb", tmp_path / "sqb"
    with Session.create([BuyiBackend, HostBackend], network, [buyi, HostDevice.default()]) as sess:
        sess.apply()
        for folder, fmt in ((hq, "HQB"), (sq, "SQB")):
            sess.setDumpOutputs(True, str(folder), fmt)
            sess.forward([x])
        bindings = sess.backend_bindings()
    hardop = next(op for op in network.ops if op.op_type == "HardOp")
    ttype = network.values[hardop.outputs[0]]
    (stored,) = hq.glob(f"{hardop.op_id}_*")
    (logical,) = sq.glob(f"{hardop.op_id}_*")
    assert stored.suffix == ".hqb" and ttype.layout == "*"  # no layout declared: the engine's
    nchw = TensorType(ttype.dtype, ttype.shape, "NCHW", ttype.quant)
    tiles = ChannelTiled(16).to_hardware(np.fromfile(logical, np.int8).reshape(ttype.shape), nchw)
    assert stored.read_bytes() == tiles.tobytes()
    assert tiles.shape == (ttype.shape[0], -(-ttype.shape[1] // 16), *ttype.shape[2:], 16)
    for op in network.ops:
        if bindings[op.op_id].is_type(HostBackend) and op.outputs:  # (Output has none)
            (path,) = hq.glob(f"{op.op_id}_*")
            assert path.suffix in (".sqb", ".sfb"), path  # no hardware layout: S


# -- ZG330's OCM optimisation, the MMU mode, and snapshots (1.1.3) --------------------------


def test_ocm_optimisation_is_a_switch_and_a_snapshot_keeps_it(
    zg330: NpuDevice, tmp_path: Path
) -> None:
    net, feeds = small_cnn()
    want = on_host(net, feeds)
    for on, region in ((True, "ocm"), (False, "plddr")):
        sess = Session.create([ZG330Backend, HostBackend], net, [zg330, None])
        npu = sess.backends[0]
        assert npu.ocm_optimize is True  # ZG330's default
        npu.ocm_optimize = on
        sess.apply()
        run = next(u for u in sess.execution_units() if len(getattr(u, "op_ids", ())) > 2)
        where = npu.placement(run.op_ids)
        inside = [k for k in where if k.startswith("intermediate:")]
        assert inside and {where[k] for k in inside} == {region}, where
        for got, w in zip(sess.forward(feeds), want, strict=True):
            np.testing.assert_array_equal(got.numpy(), w)
        if not on:
            sess.dump_snapshot(tmp_path / "no-ocm.snapshot")
        sess.close()
    # 1.1.3: the snapshot's switches, whatever the backend object says.
    fresh = ZG330Backend()
    assert fresh.ocm_optimize is True
    with Session.create_with_snapshot(
        tmp_path / "no-ocm.snapshot", [fresh, HostBackend()], [zg330, None]
    ) as restored:
        assert fresh.ocm_optimize is False
        run = next(u for u in restored.execution_units() if len(getattr(u, "op_ids", ())) > 2)
        assert "ocm" not in fresh.placement(run.op_ids).values()
        for got, w in zip(restored.forward(feeds), want, strict=True):
            np.testing.assert_array_equal(got.numpy(), w)


def test_buyi_has_no_ocm_to_optimise_and_no_npu_turns_its_mmu_mode_off() -> None:
    buyi = BuyiBackend()
    assert buyi.ocm_optimize is False and buyi.ocm_region is None
    with raises(ErrorCode.WRONG_TYPE, "no on-chip memory"):
        buyi.ocm_optimize = True
    for backend in (buyi, ZG330Backend()):
        assert backend.mmu_mode is True
        backend.mmu_mode = True
        with raises(ErrorCode.WRONG_TYPE, "no MMU.*32-bit offset"):
            backend.mmu_mode = False
    with raises(ErrorCode.WRONG_TYPE, "must be a bool"):
        ZG330Backend().ocm_optimize = 1  # type: ignore[assignment]


# -- MindSpore Lite: a delegate whose Init says RET_NOT_SUPPORT ------------------------------


def test_an_npu_backend_that_cannot_run_on_its_device_falls_back_to_the_host(
    buyi: NpuDevice, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A runtime built for another hardware version than the device's RTL: BuyiBackend
    is left out at ``Session.create`` (with a warning saying why) and the host runs every
    operator; asked for directly, the backend refuses the device."""
    import xrt.backend.npu._backend as npu_backend

    net, feeds = small_cnn()
    monkeypatch.setattr(npu_backend, "HW_VERSION_TEXT", "9.9.9")  # a newer runtime's
    caplog.set_level(logging.WARNING, logger="xrt.session")
    with Session.create([BuyiBackend, HostBackend], net, [buyi, None]).apply() as sess:
        assert all(b.is_type(HostBackend) for b in sess.backend_bindings().values())
        for got, w in zip(sess.forward(feeds), on_host(net, feeds), strict=True):
            np.testing.assert_array_equal(got.numpy(), w)
        npu = sess.backends[0]
        assert npu.not_supported == "its RTL is version 0.1.0; this runtime compiles for 9.9.9"
        assert not npu.initialized
        left = sess.placement().host_quantized
        assert left and all("this runtime compiles for 9.9.9" in p.reason for p in left)
        report = sess.placement()
        assert report.to_dict()["left_out"] == {"BuyiBackend": npu.not_supported}
        assert "  BuyiBackend left out: its RTL is version 0.1.0" in "\n".join(
            report.summary_lines()
        )
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "xrt.session"]
    assert "BuyiBackend cannot run on" in warning and "go to the backends after it" in warning
    with raises(ErrorCode.WRONG_TYPE, "BuyiBackend cannot run on .*compiles for 9.9.9"):
        BuyiBackend.create(net, buyi)


# -- OneFlow XRT: Run(..., block_until_done=false) -----------------------------------------


def test_a_forward_that_does_not_block_until_done(buyi: NpuDevice) -> None:
    net, feeds = small_cnn()
    want = on_host(net, feeds)
    gate = threading.Event()
    with Session.create([BuyiBackend, HostBackend], net, [buyi, None]).apply() as sess:
        assert any(b.is_type(BuyiBackend) for b in sess.backend_bindings().values())
        sess.set_pre_callback(lambda *_: gate.wait(60))  # the run waits for us at its start
        run = sess.forward(feeds, block_until_done=False)
        assert isinstance(run, SessionRun)
        assert not run.done() and not run.wait(0)  # returned before the run was done
        gate.set()
        for got, w in zip(run.result(120), want, strict=True):
            np.testing.assert_array_equal(got.numpy(), w)
        assert run.done()
        sess.set_pre_callback(None)
        # Runs are in order: the next call waits for the one under way.
        first = sess.forward(feeds, block_until_done=False)
        second = sess.forward(feeds)
        assert first.done()
        for a, b in zip(first.result(), second, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        # A run's errors are its result's.
        bad = sess.forward({k: v[..., :1] for k, v in feeds.items()}, block_until_done=False)
        with raises(ErrorCode.OUT_OF_RANGE):
            bad.result(120)
        last = sess.forward(feeds, block_until_done=False)
    assert last.done()  # close waited for it
    with raises(ErrorCode.WRONG_ORDER, "closed"):
        sess.forward(feeds, block_until_done=False)
