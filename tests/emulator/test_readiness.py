"""Readiness as a CI script meets it: ``serve --port-file``, ``npu-emu wait`` and a client
started while the server's devices are still starting. Real processes, no sleep."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from npuemu.server.launch import ServerProcess
from xrt import exitcodes

pytestmark = pytest.mark.sim

BIN = Path(sys.executable).parent


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "XRT_DEVICE"}
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1x1 convolution and a ReLU: the NPU runs it whole once quantized."""
    w = np.random.default_rng(0).standard_normal((16, 16, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 4, 4])],
        [helper.make_tensor("w", TensorProto.FLOAT, list(w.shape), w.ravel())],
    )
    path = tmp_path_factory.mktemp("model") / "conv_relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.fixture
def serve_proc() -> Iterator[list[subprocess.Popen[str]]]:
    """Servers a test starts (``npu-emu serve`` as a CI script runs it), stopped after it."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_port_file_then_wait_then_xrt_run_with_no_sleep(
    model: Path, tmp_path: Path, serve_proc: list[subprocess.Popen[str]]
) -> None:
    port_file = tmp_path / "server.url"
    proc = subprocess.Popen(
        [str(BIN / "npu-emu"), "serve", "--port", "0", "--port-file", str(port_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    serve_proc.append(proc)
    wait = _run(str(BIN / "npu-emu"), "wait", "--port-file", str(port_file), "--timeout", "600")
    assert wait.returncode == 0, wait.stdout + wait.stderr
    url = port_file.read_text().strip()
    assert url.startswith("grpc://127.0.0.1:") and f"{url}: npu0 can be leased" in wait.stdout
    assert port_file.stat().st_mode & 0o777 == 0o600
    run = _run(
        str(BIN / "xrt"), "run", str(model), "--device", url, "--quantize", "--require-npu",
        "--compare", "host",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "compare host: bit-exact" in run.stdout
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert not port_file.exists()  # a stopped server leaves no address behind


def test_wait_times_out_and_names_what_it_saw(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    wait = _run(
        str(BIN / "npu-emu"), "wait", "--device", f"grpc://127.0.0.1:{port}", "--timeout", "0.5"
    )
    assert wait.returncode == exitcodes.TIMED_OUT == 5
    assert f"grpc://127.0.0.1:{port}: no device could be leased within 0.5 s" in wait.stderr
    missing = _run(
        str(BIN / "npu-emu"), "wait", "--port-file", str(tmp_path / "none"), "--timeout", "0.2"
    )
    assert missing.returncode == exitcodes.TIMED_OUT and "none within 0.2 s" in missing.stderr
    bad = _run(str(BIN / "npu-emu"), "wait", "--device", "grpc://nohostport", "--timeout", "1")
    assert bad.returncode == exitcodes.BAD_INPUT and "needs a host and a port" in bad.stderr


def test_wait_for_a_named_device_the_server_lacks_is_refused() -> None:
    with ServerProcess.start(devices=1) as srv:
        wait = _run(str(BIN / "npu-emu"), "wait", "--device", f"{srv.url}/npu7", "--timeout", "30")
        assert wait.returncode == exitcodes.BAD_INPUT
        assert "the server has no device 'npu7' (devices: npu0)" in wait.stderr
        # A leased device is not free: wait times out naming who holds it.
        import xrt

        with xrt.Device.open(srv.url):
            busy = _run(str(BIN / "npu-emu"), "wait", "--device", srv.url, "--timeout", "0.5")
        assert busy.returncode == exitcodes.TIMED_OUT and "npu0 leased" in busy.stderr


def _workers(pid: int) -> list[int]:
    """The simulation workers server `pid` started (its children with a worker's hand-out
    in their environment: not the short-lived tools the start-up may run)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) != pid:
                    continue
                if b"NPU_WORKER_HANDOUT=" in (entry / "environ").read_bytes():
                    out.append(int(entry.name))
            except OSError:  # gone meanwhile
                continue
    return out


def test_a_client_waits_for_a_starting_device_saying_so(
    tmp_path: Path, serve_proc: list[subprocess.Popen[str]]
) -> None:
    """The server listens while its worker is held stopped (SIGSTOP): the device stays
    STARTING. A client opening it waits, prints one line, and gets the device once the
    worker goes on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuemu.cli", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    serve_proc.append(proc)
    assert proc.stdout is not None
    for line in proc.stdout:  # the workers start after the port listens
        if "starting 1 simulation worker" in line or "worker logs in" in line:
            break
    stopped: list[int] = []
    while not stopped:  # the worker process appears within the server's start-up
        assert proc.poll() is None
        stopped = _workers(proc.pid)
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    threading.Thread(target=lambda: [None for _ in proc.stdout or ()], daemon=True).start()
    client = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import xrt; d = xrt.Device.open('grpc://127.0.0.1:{port}'); "
            "print('opened', d.name); d.close()",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stderr is not None
        first = client.stderr.readline()
        if "no device is ready yet (npu0 starting): waiting up to" not in first:
            client.kill()
            raise AssertionError(first + client.communicate()[1])
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    out, err = client.communicate(timeout=600)
    assert client.returncode == 0 and "opened npu0" in out, out + err
    assert "waiting" not in err  # one line, not one per attempt
