"""Faults on cue in a real simulation, on both targets (docs/debugging.md, "Faults on
cue"): each kind makes the runtime report what the table says, the next operation on the
same device is correct, and the fault controller counts what fired.

The device is the embedded ``sim://`` one (a simulation worker of this process); the
controller is RTL (rtl/sim/npu_fault_ctl.sv) driven through its registers, so these are the
same faults a gRPC client or a C driver gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from xrt import Device, ErrorCode, Session, XrtError
from xrt.backend import HostBackend, NpuBackend
from xrt.hw.regs import DMA, FAULT, NPU
from xrt.hw.targets import target as target_config
from xrt.npu_device import NpuDevice

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from network_run import quantized_small_cnn
from onnx_zoo import COMPOSITES

pytestmark = pytest.mark.sim

TARGETS = ["buyi", "zg330"]


@pytest.fixture(scope="module", params=TARGETS)
def dev(request: pytest.FixtureRequest) -> Iterator[NpuDevice]:
    d = Device.open(f"sim://{request.param}")
    assert isinstance(d, NpuDevice)
    yield d
    d.close()


@pytest.fixture
def npu(dev: NpuDevice) -> Iterator[NpuDevice]:
    """The device, its faults cleared after each test."""
    yield dev
    dev.clear_faults()


def _pattern(n: int, seed: int = 1) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def _code(fn, *args) -> XrtError:  # type: ignore[no-untyped-def]
    with pytest.raises(XrtError) as err:
        fn(*args)
    return err.value


# -- memory faults on the DMA's path ---------------------------------------------------------


def test_dma_error_fails_one_transfer_naming_the_address_then_transfers_work(
    npu: NpuDevice,
) -> None:
    plddr = npu.get_mem_region("plddr")
    chunk = plddr.malloc(8192)
    data = _pattern(8192)
    npu.inject_fault("dma-error")
    err = _code(chunk.write, data)
    assert err.code == ErrorCode.DEVICE_INTERNAL
    assert "SLVERR" in err.message or "slverr" in err.message.lower(), err.message
    assert [f.hits for f in npu.faults()] == [1]
    chunk.write(data)  # one-shot: spent
    assert chunk.tobytes() == data
    chunk.free()


def test_a_fault_on_the_nth_burst_of_a_range_lets_the_others_through(npu: NpuDevice) -> None:
    plddr = npu.get_mem_region("plddr")
    a, b = plddr.malloc(4096), plddr.malloc(4096)
    # Writes of b's range only, from the 2nd: a's transfers do not count.
    npu.inject_fault(f"dma-error:decerr:{b.begin.addr:#x}+4096@2")
    a.write(_pattern(4096, 2))
    b.write(_pattern(4096, 3))  # b's first burst(s): let through ...
    assert npu.faults()[0].hits == 0
    err = _code(b.write, _pattern(4096, 4))  # ... the 2nd write of b fails
    assert err.code == ErrorCode.DEVICE_INTERNAL and "DECERR" in err.message.upper()
    assert npu.faults()[0].hits == 1
    assert a.tobytes() == _pattern(4096, 2)
    a.free()
    b.free()


def test_bitflip_flips_the_named_bit_on_the_next_read_only(npu: NpuDevice) -> None:
    plddr = npu.get_mem_region("plddr")
    chunk = plddr.malloc(256)
    data = _pattern(256, 5)
    chunk.write(data)
    at = chunk.begin.addr + 37
    npu.inject_fault(f"bitflip:plddr:{at:#x}:6")
    got = chunk.tobytes()
    assert got[37] == data[37] ^ 0x40
    assert got[:37] + got[38:] == data[:37] + data[38:]
    assert chunk.tobytes() == data  # the memory itself is unchanged; one-shot
    chunk.free()


def test_stuck_busy_is_11015_at_the_dmas_budget_and_the_abort_frees_it(npu: NpuDevice) -> None:
    plddr = npu.get_mem_region("plddr")
    chunk = plddr.malloc(4096)
    npu.inject_fault("stuck-busy")
    err = _code(chunk.write, _pattern(4096, 6))
    assert err.code == ErrorCode.TIMEOUT and "aborted" in err.message
    chunk.write(_pattern(4096, 7))
    assert chunk.tobytes() == _pattern(4096, 7)
    chunk.free()


# -- register reads ----------------------------------------------------------------------------


def test_reg_value_answers_one_read_with_the_value(npu: NpuDevice) -> None:
    regs = npu.get_reg_region("npu")
    scratch = regs.base + NPU.offset("SCRATCH")
    regs.write(scratch, 0x1111)
    npu.inject_fault("reg-value:SCRATCH:0xdead@2")
    assert [regs.read(scratch) for _ in range(3)] == [0x1111, 0xDEAD, 0x1111]
    dma = npu.get_reg_region("dma")
    npu.inject_fault("reg-value:dma.MAGIC:0x5@1+")
    assert [dma.read(dma.base + DMA.offset("MAGIC")) for _ in range(2)] == [5, 5]
    assert npu.faults()[0].hits == 2


def test_a_fault_that_names_nothing_on_the_device_is_refused(npu: NpuDevice) -> None:
    for text, named in (
        ("reg-value:NO_SUCH:1", "no register 'NO_SUCH'"),
        ("dma-error:sram", "has no memory 'sram'"),
    ):
        err = _code(npu.inject_fault, text)
        assert err.code == ErrorCode.OUT_OF_RANGE and named in err.message


# -- a network run -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def network() -> tuple:
    return quantized_small_cnn()


@pytest.fixture
def session(npu: NpuDevice, network: tuple) -> Iterator[tuple[Session, NpuBackend]]:
    net, _, _ = network
    with Session.create([npu_backend(npu), HostBackend], net, [npu, None]).apply() as sess:
        backend = sess.backends[0]
        assert isinstance(backend, NpuBackend)
        yield sess, backend


def npu_backend(dev: NpuDevice) -> type[NpuBackend]:
    from xrt.backend import BuyiBackend, ZG330Backend

    return BuyiBackend if dev.target == "buyi" else ZG330Backend


def _forward_is_right(sess: Session, network: tuple) -> None:
    _, feeds, want = network
    for got, w in zip(sess.forward(feeds), want, strict=True):
        np.testing.assert_array_equal(got.numpy(), w)


@pytest.mark.parametrize(
    "fault, code, words",
    [
        ("bus-error", ErrorCode.DEVICE_INTERNAL, "SLVERR"),
        ("drop-irq", ErrorCode.TIMEOUT, "no interrupt came"),
        ("stuck-busy:engine", ErrorCode.TIMEOUT, "WATCHDOG"),
    ],
)
def test_a_run_fails_as_documented_and_the_next_run_is_right(
    npu: NpuDevice, session: tuple, network: tuple, fault: str, code: ErrorCode, words: str
) -> None:
    sess, _ = session
    _forward_is_right(sess, network)
    npu.inject_fault(fault)
    err = _code(sess.forward, network[1])
    assert err.code == code and words in err.message, err.message
    assert npu.faults()[0].hits == 1
    _forward_is_right(sess, network)


def test_a_delayed_interrupt_only_makes_the_run_later(
    npu: NpuDevice, session: tuple, network: tuple
) -> None:
    sess, backend = session
    _forward_is_right(sess, network)
    plain = backend.launch_stats[-1].cycles
    npu.inject_fault("delay-irq:5000")
    _forward_is_right(sess, network)
    assert npu.faults()[0].hits == 1
    assert plain is not None and backend.launch_stats[-1].cycles >= plain + 5000


def test_a_spurious_interrupt_during_a_launch_is_waited_through_and_counted(
    npu: NpuDevice, session: tuple, network: tuple
) -> None:
    sess, backend = session
    before = npu.cycles
    _forward_is_right(sess, network)
    total = npu.cycles - before
    launch = backend.launch_stats[-1].cycles
    assert before is not None and launch is not None and total is not None
    # A forward is [inputs' copy][launch][outputs' copy]: its middle falls in the launch
    # unless the copies differ by more than the launch (not so for this network).
    middle = total // 2
    assert launch > 1000
    npu.inject_fault(f"spurious-irq:16@cycle={middle}")
    _forward_is_right(sess, network)
    assert npu.faults()[0].hits == 1
    assert backend.launch_stats[-1].spurious_irqs == 1


# -- recordings ----------------------------------------------------------------------------


def test_a_recorded_lease_replays_its_faults_bit_exact(tmp_path: Path) -> None:
    """Faults are register writes: the recording holds them, and the replay's simulator
    fails the same transfer and flips the same bit (``npu-emu replay --check``). A lease's
    end takes them: the next holder's device has none."""
    from npuemu.server.launch import ServerProcess
    from xrt.recording import lease_digest, read_recording

    folder = tmp_path / "recs"
    data = _pattern(4096, 9)
    with ServerProcess.start(devices=1, extra_args=("--record", str(folder))) as srv:
        dev = Device.open(srv.url)
        assert isinstance(dev, NpuDevice)
        lease = dev.transport.lease_id  # type: ignore[attr-defined]
        chunk = dev.get_mem_region("plddr").malloc(4096)
        dev.inject_fault("dma-error")
        err = _code(chunk.write, data)
        assert err.code == ErrorCode.DEVICE_INTERNAL
        chunk.write(data)
        dev.inject_fault(f"bitflip:plddr:{chunk.begin.addr + 3:#x}:1")
        assert chunk.tobytes()[3] == data[3] ^ 2
        dev.inject_fault("dma-error@1+")  # armed for good ... until the lease ends
        dev.close()
        # The next holder gets a device without the last one's faults.
        nxt = Device.open(srv.url)
        assert isinstance(nxt, NpuDevice)
        fault = nxt.get_reg_region("fault")
        assert fault.read(fault.base + FAULT.offset("MEM_MODE")) & 3 == 0
        other = nxt.get_mem_region("plddr").malloc(4096)
        other.write(data)
        assert other.tobytes() == data
        nxt.close()
    fault_base = target_config("buyi").fault_base
    (path,) = folder.glob(f"*-{lease_digest(lease)[:8]}.npurec")
    writes = [
        r
        for r in read_recording(path).records
        if any(fault_base <= a < fault_base + 0x1000 for a in _addresses(r.body))
    ]
    assert writes, "the fault injections are not in the recording"
    done = subprocess.run(
        [sys.executable, "-m", "npuemu.cli", "replay", str(path), "--check"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "XRT_PROGRESS": "0"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bit-exact" in done.stdout, done.stdout


def _addresses(body: dict) -> list[int]:
    """Every integer a recorded request holds (its register addresses among them)."""
    found: list[int] = []

    def walk(x: object) -> None:
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list | tuple):
            for v in x:
                walk(v)
        elif isinstance(x, int):
            found.append(x)

    walk(body)
    return found


# -- the command line ------------------------------------------------------------------------


def _xrt_run(model: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "xrt",
            "run",
            str(model),
            "--quantize",
            "--device",
            "sim://buyi",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "XRT_PROGRESS": "0"},
        check=False,
    )


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import onnx

    path = tmp_path_factory.mktemp("model") / "small_cnn.onnx"
    onnx.save(COMPOSITES["small_cnn"](), path)
    return path


def test_xrt_run_fault_dma_error_exits_1_with_the_devices_error(model_file: Path) -> None:
    done = _xrt_run(model_file, "--fault", "dma-error")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "11014" in done.stderr and "SLVERR" in done.stderr.upper(), done.stderr


def test_xrt_run_bitflip_is_found_by_compare_host(model_file: Path) -> None:
    done = _xrt_run(model_file, "--fault", "bitflip:7", "--compare", "host")
    assert done.returncode == 2 and "bitflip takes no argument" in done.stderr
    # One flipped bit can be masked by the network (a ReLU, a max-pool): with this input
    # (seed 1) it is not, and the compare finds it.
    done = _xrt_run(model_file, "--fault", "bitflip", "--compare", "host", "--seed", "1")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "fault bitflip: fired 1 time(s)" in done.stdout, done.stdout
    assert "compare host: output 'softmax110' differs" in done.stdout, done.stdout
