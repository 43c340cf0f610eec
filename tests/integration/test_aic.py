"""`xrt.aic` (Context, InferenceSet, profiling handles) against real ``npu-emu serve``
processes: every result bit-exact against HostBackend on the same quantized network."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "emulator"))

from netutil import random_feeds
from onnx_zoo import COMPOSITES
from rpc_client import worker_pid

from npuemu.server.launch import ServerProcess
from npuemu.sim.coverage import coverage_dir
from xrt import Device, ErrorCode, XrtError
from xrt.aic import (
    Context,
    HandleState,
    InferenceSet,
    InferenceSetProperties,
    LogLevel,
    ProfilingHandle,
    ProfilingReport,
    ProfilingType,
    Qpc,
    StreamProfilingHandle,
)
from xrt.backend import BuyiBackend, HostBackend
from xrt.network import Network
from xrt.quant import quantize_network
from xrt.session import Session
from xrt.session.container import compile_container

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return COMPOSITES["small_cnn"]()


@pytest.fixture(scope="module")
def qnet(model) -> Network:  # type: ignore[no-untyped-def]
    net = Network.from_onnx(model)
    return quantize_network(net, [random_feeds(model, seed=s) for s in range(2)])


@pytest.fixture(scope="module")
def program(qnet: Network, tmp_path_factory) -> Qpc:  # type: ignore[no-untyped-def]
    """The network compiled for Buyi without a device (``xrt compile``'s container)."""
    path = tmp_path_factory.mktemp("aic") / "small_cnn.qpc"
    compile_container(qnet, "buyi", path)
    return Qpc.from_file(path)


@pytest.fixture(scope="module")
def zg330_program(qnet: Network, tmp_path_factory) -> Qpc:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("aic") / "small_cnn_zg330.qpc"
    compile_container(qnet, "zg330", path)
    return Qpc.from_buffer(path.read_bytes())


def _inputs(model, n: int) -> list[list[np.ndarray]]:  # type: ignore[no-untyped-def]
    return [list(random_feeds(model, seed=100 + i).values()) for i in range(n)]


def _host(qnet: Network, inputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    with Session.create([HostBackend], qnet).apply() as sess:
        return [[t.numpy() for t in sess.forward(x)] for x in inputs]


@pytest.fixture
def context(buyi_server: ServerProcess) -> Iterator[Context]:
    with Context([buyi_server.url, buyi_server.url]) as ctx:
        yield ctx


def test_inference_set_runs_many_more_submissions_than_handles_bit_exact(
    context: Context,
    program: Qpc,
    model,
    qnet: Network,  # type: ignore[no-untyped-def]
) -> None:
    inputs = _inputs(model, 10)
    want = _host(qnet, inputs)
    got: dict[int, list[np.ndarray]] = {}
    with InferenceSet(context, program, set_size=1, num_activations=2) as iset:
        assert iset.num_handles == 2
        seen_handles = set()
        pending = 0
        for i, x in enumerate(inputs):
            if pending == 2:  # every handle is out: take one back before the next
                done = iset.get_completed(timeout=120)
                assert done.ok, done.error
                got[done.id] = done.outputs()
                iset.put_completed(done)
                pending -= 1
            h = iset.get_available(timeout=120)
            seen_handles.add(h.index)
            h.set_buffers(x)
            iset.submit(h, id=1000 + i)
            pending += 1
        iset.wait_for_completion(timeout=120)
        while pending:
            done = iset.get_completed(timeout=0)
            got[done.id] = done.outputs()
            np.testing.assert_array_equal(done.get_buffers()[0], inputs[done.id - 1000][0])
            iset.put_completed(done)
            pending -= 1
        assert seen_handles == {0, 1}
        assert iset.completed_count == 10 and iset.failed_ids == []
    for i, w in enumerate(want):
        for g, e in zip(got[1000 + i], w, strict=True):
            np.testing.assert_array_equal(g, e)


def test_get_completed_id_and_caller_output_buffers(
    context: Context,
    program: Qpc,
    model,
    qnet: Network,  # type: ignore[no-untyped-def]
) -> None:
    inputs = _inputs(model, 3)
    want = _host(qnet, inputs)
    with InferenceSet(context, program, set_size=2, num_activations=1) as iset:
        outs = [np.full_like(w[0], 77) for w in want]
        ids = [iset.submit([*inputs[i], outs[i]]).id for i in range(2)]
        # both handles are out: take the second back first, by id, then submit the third
        second = iset.get_completed_id(ids[1], timeout=120)
        assert second.outputs()[0] is outs[1]
        iset.put_completed(second)
        iset.submit([*inputs[2], outs[2]])
        iset.wait_for_completion(timeout=120)
        for _ in range(2):
            iset.put_completed(iset.get_completed(timeout=0))
    for o, w in zip(outs, want, strict=True):
        np.testing.assert_array_equal(o, w[0])


def test_life_cycle_misuse_is_refused_with_the_reason(
    context: Context,
    program: Qpc,
    model,  # type: ignore[no-untyped-def]
) -> None:
    (x,) = _inputs(model, 1)
    with InferenceSet(context, program, set_size=1, num_activations=1) as iset:
        with pytest.raises(XrtError) as e:
            iset.get_completed(timeout=0)
        assert e.value.code == ErrorCode.WRONG_ORDER and "nothing is submitted" in e.value.message
        h = iset.get_available()
        assert h.state is HandleState.HELD
        with pytest.raises(XrtError) as e:
            iset.submit(h)  # no buffers yet
        assert e.value.code == ErrorCode.WRONG_ORDER
        with pytest.raises(XrtError) as e:
            iset.put_completed(h)
        assert e.value.code == ErrorCode.WRONG_ORDER
        with pytest.raises(XrtError) as e:
            h.set_buffers([x[0].astype(np.float64)])
        assert e.value.code == ErrorCode.WRONG_TYPE and "float64" in e.value.message
        with pytest.raises(XrtError) as e:
            h.set_buffers([x[0][..., :-1]])
        assert e.value.code == ErrorCode.OUT_OF_RANGE and iset.input_names[0] in e.value.message
        with pytest.raises(XrtError) as e:  # the only handle is held: nothing can come back
            iset.get_available(timeout=0)
        assert e.value.code == ErrorCode.TIMEOUT
        h.set_buffers(x)
        iset.submit(h, id=7)
        with pytest.raises(XrtError) as e:
            iset.get_completed_id(8, timeout=0)
        assert "no submission has id 8" in e.value.message
        done = iset.get_completed_id(7, timeout=120)
        assert done is h and done.ok
        iset.put_completed(done)
        with pytest.raises(XrtError) as e:
            iset.put_completed(done)  # twice
        assert e.value.code == ErrorCode.WRONG_ORDER
    with pytest.raises(XrtError) as e:
        iset.get_available(timeout=0)
    assert "closed" in e.value.message


def test_context_find_device_and_callbacks(
    buyi_server: ServerProcess, program: Qpc, zg330_program: Qpc
) -> None:
    logs: list[tuple[LogLevel, str]] = []
    with Context([buyi_server.url], log_callback=lambda lv, m: logs.append((lv, m))) as ctx:
        assert ctx.obj_name == "Context" and ctx.get_log_level() == LogLevel.INFO
        assert any("1 device(s)" in m for _, m in logs)
        dev = ctx.find_device(program)
        ctx.claim(dev)
        with pytest.raises(XrtError) as e:
            ctx.find_device(program)
        assert e.value.code == ErrorCode.OUT_OF_RANGE and "in use" in e.value.message
        with pytest.raises(XrtError) as e:
            InferenceSet(ctx, program, num_activations=1)
        assert "in use" in e.value.message
        ctx.release(dev)
        ctx.set_log_level(LogLevel.ERROR)
        ctx.log(LogLevel.INFO, "hidden")
        assert all(m != "hidden" for _, m in logs)

        with pytest.raises(XrtError) as e:
            InferenceSet(ctx, zg330_program, num_activations=1)
        assert e.value.code == ErrorCode.WRONG_TYPE and "no zg330 device" in e.value.message
    assert dev.closed  # the context opened it, the context closed it


def test_profiling_handles_report_every_inference(
    context: Context,
    program: Qpc,
    model,  # type: ignore[no-untyped-def]
) -> None:
    inputs = _inputs(model, 4)
    reports: list[ProfilingReport] = []
    streamed: list[ProfilingReport] = []
    with InferenceSet(
        context, program, set_size=2, num_activations=2,
        properties=InferenceSetProperties(name="cnn-a"),
    ) as iset:  # fmt: skip
        prof = ProfilingHandle(iset, num_samples=3, callback=reports.append)
        stream = StreamProfilingHandle(
            3600, streamed.append, type=ProfilingType.STATS, program_pattern="^cnn-"
        )
        stream.start()
        prof.start()
        for x in inputs:
            iset.submit(x)
        iset.wait_for_completion(timeout=120)
        for _ in inputs:
            iset.put_completed(iset.get_completed(timeout=0))
        prof.stop()  # already reported at 3 samples: no second report
        stream.stop()
        stream.flush_reports(timeout=60)
    (report,) = reports
    assert report.count == 3 and len(report.samples) == 3 and report.failed == 0
    assert all(s.device_cycles > 0 and s.latency_s >= s.run_s > 0 for s in report.samples)
    assert report.latency_p50_s <= report.latency_p99_s
    (last,) = streamed  # one period of an hour: only stop's partial report
    assert last.count == 4 and last.samples == () and last.device_cycles > 0


def test_a_device_lost_mid_run_reaches_the_error_handler_and_the_inference_moves_on(
    serve,
    program,
    model,
    qnet: Network,  # type: ignore[no-untyped-def]
) -> None:
    # Two servers of one device each; server A dies (SIGKILL, its workers with it) in the
    # middle of activation 0's first inference, right before its NPU program launches.
    inputs = _inputs(model, 3)
    want = _host(qnet, inputs)
    errors: list[tuple[int, XrtError]] = []
    with (
        serve(target="buyi", devices=1) as a,
        serve(target="buyi", devices=1) as b,
        Context([a.url, b.url], error_handler=lambda c, e: errors.append((c, e))) as ctx,
    ):
        iset = InferenceSet(ctx, program, set_size=2, num_activations=2)

        def kill_a(_sess, unit, backend, _tensors):  # type: ignore[no-untyped-def]
            if isinstance(backend, BuyiBackend) and a.proc.poll() is None:
                a.proc.send_signal(signal.SIGKILL)
                a.proc.wait()

        iset.session(0).set_pre_callback(kill_a)
        # Devices fill in order: activation 0 takes the first submission, loses its
        # server mid-run, and the inference runs again on activation 1.
        h = iset.submit(inputs[0])
        done = iset.get_completed_id(h.id, timeout=120)
        assert done.ok and done.activation == 1 and done.attempts == 2
        np.testing.assert_array_equal(done.outputs()[0], want[0][0])
        iset.put_completed(done)
        ((ctx_id, err),) = errors
        assert ctx_id == ctx.id and "activation 0" in err.message
        assert iset.live_activations == 1
        # The last device dies too: the inference fails with its id, nothing hangs.
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        h = iset.submit(inputs[1], id=41)
        iset.wait_for_completion(timeout=120)
        done = iset.get_completed(timeout=0)
        assert done is h and not done.ok and done.error is not None
        assert iset.failed_ids == [41] and len(errors) == 2
        iset.put_completed(done)
        with pytest.raises(XrtError) as e:
            iset.submit(inputs[2])
        assert e.value.code == ErrorCode.DEVICE_INTERNAL and "no activation" in e.value.message
        iset.close()


def test_a_worker_restart_between_inferences_is_survived(
    serve,
    program,
    model,
    qnet: Network,  # type: ignore[no-untyped-def]
) -> None:
    # A simulation worker killed while its device is idle is restarted by the server with
    # the lease and memory kept: the next inference on it waits for the restart and is
    # still bit-exact (no error, no retry).
    inputs = _inputs(model, 2)
    want = _host(qnet, inputs)
    with (
        serve(target="buyi", devices=1) as srv,
        Context([srv.url]) as ctx,
        InferenceSet(ctx, program, set_size=1, num_activations=1) as iset,
    ):
        for i, x in enumerate(inputs):
            if i == 1:
                os.kill(worker_pid(srv, iset.devices[0]), signal.SIGKILL)
            done = iset.get_completed_id(iset.submit(x).id, timeout=120)
            assert done.ok and done.attempts == 1, done.error
            np.testing.assert_array_equal(done.outputs()[0], want[i][0])
            iset.put_completed(done)


def test_submissions_from_many_threads(
    context: Context,
    program: Qpc,
    model,
    qnet: Network,  # type: ignore[no-untyped-def]
) -> None:
    inputs = _inputs(model, 8)
    want = _host(qnet, inputs)
    results: dict[int, np.ndarray] = {}
    lock = threading.Lock()
    with InferenceSet(context, program, set_size=1, num_activations=2) as iset:

        def client(k: int) -> None:
            for i in range(k, len(inputs), 2):
                h = iset.submit(inputs[i], id=i)
                done = iset.get_completed_id(h.id, timeout=120)
                with lock:
                    results[i] = done.outputs()[0].copy()
                iset.put_completed(done)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in threads)
    assert sorted(results) == list(range(8))
    for i, w in enumerate(want):
        np.testing.assert_array_equal(results[i], w[0])


def test_inference_set_on_zg330_from_a_container_in_memory(
    zg330_server: ServerProcess,
    zg330_program: Qpc,
    model,
    qnet: Network,  # type: ignore[no-untyped-def]
) -> None:
    inputs = _inputs(model, 3)
    want = _host(qnet, inputs)
    with (
        Context([zg330_server.url]) as ctx,
        InferenceSet(ctx, zg330_program, set_size=2, num_activations=1) as iset,
    ):
        handles = [iset.submit(x) for x in inputs[:2]]
        iset.wait_for_completion(timeout=120)
        for h in handles:
            done = iset.get_completed_id(h.id, timeout=0)
            np.testing.assert_array_equal(done.outputs()[0], want[done.id][0])
            iset.put_completed(done)
        done = iset.get_completed_id(iset.submit(inputs[2]).id, timeout=120)
        np.testing.assert_array_equal(done.outputs()[0], want[2][0])


@pytest.mark.skipif(
    coverage_dir() is not None,
    reason="takes checkpoints, which coverage models cannot (no --savable with --coverage)",
)
def test_device_log_capture_streams_the_servers_lines_about_the_contexts_devices(
    serve,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    lines: list[tuple[LogLevel, str]] = []
    seen = threading.Condition()

    def on_log(level: LogLevel, message: str) -> None:
        with seen:
            lines.append((level, message))
            seen.notify_all()

    def wait_for(text: str) -> tuple[LogLevel, str]:
        with seen:
            assert seen.wait_for(lambda: any(text in m for _, m in lines), 120), lines
            return next((lv, m) for lv, m in lines if text in m)

    with serve(target="buyi", devices=2) as srv:
        other = Device.open(srv.url)  # npu0: another client's device
        with Context([srv.url], log_callback=on_log, collect_device_logs=True) as ctx:
            (dev,) = ctx.devices
            assert dev.name == "npu1"
            dev.checkpoint(tmp_path / "a.ckpt")
            level, message = wait_for("saved a checkpoint of npu1")
            assert level == LogLevel.INFO and message.startswith("device npu1: ")
            other.checkpoint(tmp_path / "b.ckpt")  # npu0's lines are not ours
            os.kill(worker_pid(srv, "npu1"), signal.SIGKILL)
            level, _ = wait_for("simulation worker restarted")
            assert all("npu1" in m for _, m in lines if m.startswith("device "))
            assert not any("checkpoint of npu0" in m for _, m in lines)
        other.close()
