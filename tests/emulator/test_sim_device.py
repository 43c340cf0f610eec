"""``sim://buyi`` and ``sim://zg330``: a simulated NPU private to the process, no server.

Real simulation workers, real subprocesses: registers, DMA round trips and the interrupt on
the embedded device; ``Device()`` with and without ``$XRT_DEVICE`` (a real ``npu-emu
serve`` for the grpc case); the worker stops on close, when the device is collected, at
interpreter exit and when its parent is SIGKILLed; a dead worker is an XrtError 11014
naming the device; ``xrt run --quantize --require-npu --compare host`` with no server.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from npuemu.embedded import SimTransport
from npuemu.server.launch import ServerProcess
from xrt import Device, ErrorCode, XrtError
from xrt.cli import main
from xrt.hw.regs import DMA, NPU
from xrt.npu_device import BuyiDevice, NpuDevice, ZG330Device
from xrt.transport.grpc import GrpcTransport

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from onnx_zoo import COMPOSITES
from test_lockstep_server import DST, PROG, SRC, B, copy_program, launch

from xrt.hw import isa
from xrt.hw.isa import StoreMode

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]


def raises(code: ErrorCode) -> pytest.RaisesExc:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(cond: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def worker_pid(dev: NpuDevice) -> int:
    t = dev.transport
    assert isinstance(t, SimTransport) and t.worker_pid is not None
    return t.worker_pid


def child_env(**extra: str) -> dict[str, str]:
    """No $XRT_DEVICE, no progress lines (a slow start prints them on stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "XRT_DEVICE"}
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", XRT_PROGRESS="0", **extra)
    return env


@pytest.fixture(scope="module")
def buyi() -> Iterator[NpuDevice]:
    dev = Device.open("sim://buyi")
    assert isinstance(dev, NpuDevice)
    yield dev
    dev.close()


# -- the device ----------------------------------------------------------------------------


def test_sim_buyi_is_a_buyi_device_with_its_regions(buyi: NpuDevice) -> None:
    assert isinstance(buyi, BuyiDevice) and buyi.target == "buyi" and buyi.name == "sim://buyi"
    assert set(buyi.reg_regions) == {"npu", "dma", "fault"}
    assert set(buyi.mem_regions) == {"udma", "plddr"}
    assert str(buyi.url) == "sim://buyi" and alive(worker_pid(buyi))
    udma = buyi.get_mem_region("udma")
    assert udma.host_visible and (udma.base, udma.size) == (0x1000_0000, 64 << 20)
    assert buyi.cycles is not None and buyi.cycles > 0


def test_registers_round_trip(buyi: NpuDevice) -> None:
    npu, dma = buyi.get_reg_region("npu"), buyi.get_reg_region("dma")
    assert npu.regs.MAGIC.read() == NPU.register("MAGIC").reset
    assert dma.regs.MAGIC.read() == DMA.register("MAGIC").reset
    assert npu.regs.TARGET.ID.read() == 1
    for value in (0, 0xFFFF_FFFF, 0xA5A5_5A5A):
        npu.regs.SCRATCH.write(value)
        dma.regs.SCRATCH.write(value ^ 0xFFFF_FFFF)
        assert npu.regs.SCRATCH.read() == value
        assert dma.regs.SCRATCH.read() == value ^ 0xFFFF_FFFF
    with raises(ErrorCode.DEVICE_INTERNAL):  # a hole of the block answers SLVERR
        npu.read(npu.base + 0xFFC)


def test_dma_round_trip_of_plddr_is_bit_exact(buyi: NpuDevice) -> None:
    plddr = buyi.get_mem_region("plddr")
    data = np.random.default_rng(1).integers(0, 256, (1 << 20) + 3, dtype=np.uint8)
    before = buyi.dma_engine.transfers
    plddr.write(plddr.base + 5, data)
    back = np.empty_like(data)
    plddr.read(back, plddr.base + 5)
    assert np.array_equal(back, data) and buyi.dma_engine.transfers > before


def test_dma_raises_the_interrupt(buyi: NpuDevice) -> None:
    dma, udma = buyi.get_reg_region("dma"), buyi.get_mem_region("udma")
    plddr = buyi.get_mem_region("plddr")
    r = dma.regs
    assert buyi.wait_irq(0.0) is False
    before = buyi.cycles
    assert buyi.wait_irq(30.0, max_cycles=5000) is False  # the simulated limit comes first
    assert buyi.cycles is not None and before is not None and buyi.cycles - before >= 5000
    n = 1 << 16
    dma.execute(
        [
            r.SRC_LO.op_write(plddr.base & 0xFFFF_FFFF),
            r.SRC_HI.op_write(plddr.base >> 32),
            r.DST_LO.op_write(udma.base),
            r.DST_HI.op_write(0),
            r.ROW_BYTES.op_write(n),
            r.ROWS.op_write(1),
            r.INT_STATUS.op_write(3),
            r.INT_ENABLE.op_write(3),
            r.CTRL.op_write(1),
        ]
    )
    assert buyi.wait_irq(60.0) is True
    assert r.STATUS.read_fields()["DONE"] == 1
    r.INT_STATUS.write(3)
    r.INT_ENABLE.write(0)
    assert buyi.wait_irq(0.0) is False


def test_reset_restores_registers_and_keeps_memory(buyi: NpuDevice) -> None:
    npu, udma = buyi.get_reg_region("npu"), buyi.get_mem_region("udma")
    npu.regs.SCRATCH.write(0x1234)
    udma.write(udma.base, b"kept")
    buyi.reset()
    assert npu.regs.SCRATCH.read() == 0
    out = bytearray(4)
    udma.read(out, udma.base)
    assert out == b"kept"


def test_sim_zg330_has_its_on_chip_memory() -> None:
    with Device.open("sim://zg330") as dev:
        assert isinstance(dev, ZG330Device) and dev.name == "sim://zg330"
        assert set(dev.mem_regions) == {"udma", "plddr", "ocm"}
        assert dev.get_reg_region("npu").regs.TARGET.ID.read() == 2
        ocm = dev.get_mem_region("ocm")
        data = np.random.default_rng(2).integers(0, 256, 10_000, dtype=np.uint8)
        ocm.write(ocm.base + 7, data)
        back = np.empty_like(data)
        ocm.read(back, ocm.base + 7)
        assert np.array_equal(back, data)


@pytest.mark.parametrize(
    ("url", "code", "words"),
    [
        ("sim://tpu", ErrorCode.WRONG_TYPE, ("'tpu'", "sim://buyi, sim://zg330")),
        ("sim://", ErrorCode.WRONG_TYPE, ("no simulated target", "sim://buyi")),
        ("sim://buyi:5000", ErrorCode.OUT_OF_RANGE, ("only a target",)),
        ("sim://buyi/npu0", ErrorCode.OUT_OF_RANGE, ("only a target",)),
        ("sim://buyi?lockstp=1", ErrorCode.WRONG_TYPE, ("lockstp", "known: bounce")),
        ("sim://buyi?lockstep=2", ErrorCode.WRONG_TYPE, ("lockstep=2",)),
    ],
)
def test_bad_sim_urls_are_refused_naming_the_bad_value(
    url: str, code: ErrorCode, words: tuple[str, ...]
) -> None:
    with raises(code) as e:
        Device.open(url)
    assert all(w in e.value.message for w in words), e.value.message


# -- the default device ----------------------------------------------------------------------


def test_device_without_xrt_device_is_the_embedded_buyi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XRT_DEVICE", raising=False)
    with Device() as dev:
        assert isinstance(dev, BuyiDevice) and isinstance(dev.transport, SimTransport)
        assert str(dev.url) == "sim://buyi"
        pid = worker_pid(dev)
        assert dev.get_reg_region("npu").regs.MAGIC.read() == NPU.register("MAGIC").reset
    assert not alive(pid)  # close stopped the worker


def test_device_with_xrt_device_opens_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    with ServerProcess.start(target="zg330", devices=1) as srv:
        monkeypatch.setenv("XRT_DEVICE", srv.url)
        with Device() as dev:
            assert isinstance(dev, ZG330Device) and isinstance(dev.transport, GrpcTransport)
            assert str(dev.url) == srv.url and dev.name == "npu0"


# -- the worker's life -----------------------------------------------------------------------


def test_a_collected_device_stops_its_worker() -> None:
    dev = Device.open("sim://buyi")
    assert isinstance(dev, NpuDevice)
    pid = worker_pid(dev)
    del dev
    gc.collect()
    wait_until(lambda: not alive(pid), "the collected device's worker to stop")


def test_a_dead_worker_is_an_error_naming_the_device_not_a_hang() -> None:
    dev = Device.open("sim://buyi")
    assert isinstance(dev, NpuDevice)
    try:
        npu = dev.get_reg_region("npu")
        plddr = dev.get_mem_region("plddr")
        pid = worker_pid(dev)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not alive(pid), "the worker to die")
        for action in (
            lambda: npu.regs.SCRATCH.read(),
            lambda: npu.execute([npu.regs.SCRATCH.op_write(1), npu.regs.MAGIC.op_read()]),
            lambda: dev.wait_irq(5.0),
            lambda: plddr.write(plddr.base, b"lost"),
            dev.reset,
        ):
            with raises(ErrorCode.DEVICE_INTERNAL) as e:
                action()
            message = e.value.message
            assert "on sim://buyi: its simulation worker exited (pid" in message, message
            assert f"pid {pid}" in message and "close it and open a new one" in message
    finally:
        dev.close()


_OPEN_AND_WAIT = """
import sys
from xrt import Device
dev = Device.open(sys.argv[1])
print(dev.transport.worker_pid, dev.transport.log_path, flush=True)
sys.stdin.read()  # until the test closes our stdin (or kills us)
"""


def _open_in_child(url: str) -> tuple[subprocess.Popen[str], int, Path]:
    """A child process that opened `url`: it, its worker's pid and the worker's log."""
    child = subprocess.Popen(
        [sys.executable, "-c", _OPEN_AND_WAIT, url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=child_env(),
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line.split() or not line.split()[0].isdigit():
        child.kill()
        raise AssertionError(f"the child did not open {url}: {line}{child.communicate()[1]}")
    pid, log = line.split()
    return child, int(pid), Path(log)


def test_parent_killed_leaves_no_worker() -> None:
    child, pid, log = _open_in_child("sim://buyi")
    try:
        assert alive(pid) and log.is_file()
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        wait_until(lambda: not alive(pid), "the orphaned worker to die")
        assert log.parent.is_dir()  # nobody cleaned up: the next sim:// open does
        with Device.open("sim://buyi"):
            assert not log.parent.exists()
    finally:
        child.kill()
        child.communicate()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_parent_exiting_without_close_stops_its_worker() -> None:
    child, pid, log = _open_in_child("sim://zg330")
    try:
        assert log.is_file()
        _, err = child.communicate("", timeout=60)  # EOF: the script ends, no close()
        assert child.returncode == 0, err
        # Stopped at interpreter exit (before the parent was gone), its folder removed.
        assert not alive(pid) and not log.parent.exists()
        assert err == "", err  # no warning, no noise at exit
    finally:
        child.kill()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


# -- README and xrt run ------------------------------------------------------------------------


def test_readme_first_example_runs_without_a_server() -> None:
    readme = (REPO / "README.md").read_text()
    example = readme.split("## Use it", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert "xrt.Device()" in example
    proc = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=child_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:2] == ["0x4e505530", "[0 1 2 3]"]


def test_xrt_run_on_the_default_device_needs_no_server(tmp_path: Path) -> None:
    model = tmp_path / "small_cnn.onnx"
    onnx.save(COMPOSITES["small_cnn"](), model)
    args = ["run", str(model), "--quantize", "--calib", "2", "--require-npu", "--compare", "host"]
    proc = subprocess.run(
        [sys.executable, "-m", "xrt.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=child_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "backends buyi, host" in out
    assert "quantized operators on an accelerator: 20 of 20" in out
    assert "compare host: bit-exact" in out


def test_xrt_run_of_a_container_runs_on_the_embedded_device_of_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("XRT_DEVICE", raising=False)
    model, container = tmp_path / "small_cnn.onnx", tmp_path / "small_cnn.zg330"
    onnx.save(COMPOSITES["small_cnn"](), model)
    args = ["compile", str(model), "--quantize", "--calib", "2", "--target", "zg330"]
    assert main([*args, "-o", str(container)]) == 0
    capsys.readouterr()
    assert main(["run", str(container), "--compare", "host", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["device"] == "sim://zg330" and summary["container"]["target"] == "zg330"
    assert summary["compare"] == {"against": "host", "bit_exact": True}
    assert summary["npu"]["launches"] >= 1


def test_xrt_run_with_zg330_backends_opens_the_embedded_zg330(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("XRT_DEVICE", raising=False)
    model = tmp_path / "small_cnn.onnx"
    onnx.save(COMPOSITES["small_cnn"](), model)
    args = ["run", str(model), "--quantize", "--calib", "1", "--backends", "zg330,host"]
    assert main([*args, "--require-npu", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["device"] == "sim://zg330" and summary["backends"] == ["zg330", "host"]


def test_lockstep_checks_every_launch_of_the_embedded_device() -> None:
    """``?lockstep=1``: a correct launch runs; one that overwrites its own later
    instructions (the engine runs what it fetched ahead, the golden model what is in memory)
    fails with 11014 naming lockstep, which the same device without lockstep lets pass."""
    vals = np.arange(-32, 32, dtype=np.int32).reshape(4, B) * 3
    want = np.clip((vals + 1) >> 1, -128, 127).astype(np.int8)
    # Instruction 2 writes 64 bytes over instructions 3 and 4 (tests/integration/
    # test_lockstep_server.py tells the story).
    prog = [*copy_program()[:2], copy_program()[2], copy_program()[2], isa.Finish()]
    prog[2] = isa.Store(mode=StoreMode.INT32, base=2, x_size=1, y_size=1, z_size=1,
                        sram_x_stride=1, pop_prev=True)  # fmt: skip
    prog[3] = isa.Store(mode=StoreMode.INT8, base=1, x_size=1, y_size=1, z_size=1,
                        sram_x_stride=1, m_or_prm=1, lo=-128, hi=127)  # fmt: skip
    row = isa.encode_program([isa.Sync(unit=isa.Unit.LOAD), isa.Finish()])
    for lockstep in (1, 0):
        with Device.open(f"sim://buyi?lockstep={lockstep}") as dev:
            assert isinstance(dev, NpuDevice)
            plddr = dev.get_mem_region("plddr")
            plddr.write(plddr.base + SRC, vals.tobytes())
            bases = {0: plddr.base + SRC, 1: plddr.base + DST}
            launch(dev, copy_program(), bases)
            got = bytearray(want.nbytes)
            plddr.read(got, plddr.base + DST)
            assert np.array_equal(np.frombuffer(bytes(got), np.int8).reshape(4, B), want)
            plddr.write(plddr.base + SRC, row)  # ACC row 0 = the two new instructions
            bases[2] = plddr.base + PROG + 3 * isa.INSN_BYTES
            if not lockstep:
                launch(dev, prog, bases)  # unchecked: the engine runs what it fetched
                continue
            with raises(ErrorCode.DEVICE_INTERNAL) as e:
                launch(dev, prog, bases)
            assert "lockstep" in e.value.message and "instruction 3" in e.value.message
