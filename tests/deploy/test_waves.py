"""Waveforms on demand: `npu-emu serve --waves DIR`, StartWaves/StopWaves through the
runtime (`GrpcTransport.start_waves/stop_waves`), FST files named by device and cycle
range, read back with an independent FST reader (pywellen)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.errors import XrtError
from xrt.hw.targets import CLOCK_PERIOD_PS

pywellen = pytest.importorskip("pywellen")

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def waves_server(tmp_path_factory) -> Iterator[tuple[ServerProcess, Path]]:
    folder = tmp_path_factory.mktemp("waves")
    with ServerProcess.start(devices=1, extra_args=("--waves", str(folder))) as srv:
        yield srv, folder


def read_fst(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Every signal's changes, (time in ps, value), by hierarchical name."""
    wave = pywellen.Waveform(str(path))
    assert wave.file_format == "FST"
    return {v.full_name: v for v in wave.all_vars()}


def changes(signals: dict, name: str) -> list[tuple[int, int]]:
    return list(signals[name].signal)


def test_window_between_two_calls_holds_a_dma_transfer(waves_server):
    srv, folder = waves_server
    with Device.open(f"{srv.url}/npu0") as dev:
        start = dev.transport.start_waves()
        data = np.arange(4096, dtype=np.uint32)
        chunk = dev.default_mem_region().malloc(data.nbytes)  # plddr: moved by the DMA
        chunk.write(data)
        back = np.zeros_like(data)
        chunk.read(back)
        window = dev.transport.stop_waves()
    assert np.array_equal(back, data)
    path = Path(window.path)
    assert path.parent == folder.resolve()
    assert re.fullmatch(rf"npu0-c{window.first_cycle}-c{window.last_cycle}\.fst", path.name)
    assert start <= window.first_cycle < window.last_cycle
    assert path.stat().st_size == window.size_bytes
    assert window.size_bytes < 5 << 20, "a window of one small transfer should be small"
    print(f"waveform window: {path} ({window.size_bytes} B)")

    signals = read_fst(path)
    # The whole design is there, down to the DMA's read and write halves.
    for name in ("npu_sim.clk_o", "npu_sim.busy_o", "npu_sim.u_npu.u_dma.u_core.u_wr.busy_o"):
        assert name in signals, sorted(signals)[:20]
    # The file covers the window: the clock's first and last dumped edges, in cycles.
    clk = changes(signals, "npu_sim.clk_o")
    assert clk[0][0] // CLOCK_PERIOD_PS == window.first_cycle
    assert clk[-1][0] // CLOCK_PERIOD_PS == window.last_cycle
    # The DMA ran inside it (write, then read back): busy rose and fell twice.
    busy = [v for _, v in changes(signals, "npu_sim.busy_o")]
    assert busy.count(1) >= 2 and busy[-1] == 0, busy


def test_window_by_cycles_closes_itself(waves_server):
    srv, _ = waves_server
    with Device.open(f"{srv.url}/npu0") as dev:
        start = dev.transport.start_waves(5000)
        dev.wait_irq(timeout_s=60.0, max_cycles=20_000)  # runs the clock past the window
        window = dev.transport.stop_waves()
    assert window.first_cycle == start
    assert window.last_cycle - window.first_cycle == 5000
    clk = changes(read_fst(Path(window.path)), "npu_sim.clk_o")
    assert clk[-1][0] // CLOCK_PERIOD_PS - clk[0][0] // CLOCK_PERIOD_PS == 5000


def test_windows_belong_to_their_lease(waves_server):
    srv, _ = waves_server
    with Device.open(f"{srv.url}/npu0") as dev:
        dev.transport.start_waves()
        with pytest.raises(XrtError, match="already open"):
            dev.transport.start_waves()
    with Device.open(f"{srv.url}/npu0") as dev, pytest.raises(XrtError, match="no waveform"):
        dev.transport.stop_waves()


def test_cli_records_a_window(waves_server):
    srv, folder = waves_server
    out = run_cli(["waves", "npu0", "--cycles", "3000", "--server", srv.address])
    assert out.returncode == 0, out.stderr
    m = re.search(r"(\S+npu0-c(\d+)-c(\d+)\.fst) \(", out.stdout)
    assert m and Path(m.group(1)).is_file() and Path(m.group(1)).parent == folder.resolve()
    assert int(m.group(3)) - int(m.group(2)) == 3000


def test_signals_cut_a_window_to_the_scopes_asked_for(waves_server):
    """``--signals``: the DMA engine's scope and one top port, nothing else; the DMA's
    signals still change during a transfer."""
    srv, _folder = waves_server
    with Device.open(f"{srv.url}/npu0") as dev:
        dev.transport.start_waves(signals="npu_sim.u_npu.u_dma,$rootio.irq_o")
        data = np.arange(1024, dtype=np.uint32)
        chunk = dev.default_mem_region().malloc(data.nbytes)
        chunk.write(data)
        window = dev.transport.stop_waves()
    signals = read_fst(Path(window.path))
    assert signals, "the scopes matched no signal"
    outside = [n for n in signals if not n.startswith(("npu_sim.u_npu.u_dma.", "$rootio.irq_o"))]
    assert not outside, outside[:5]
    assert "$rootio.irq_o" in signals
    assert any(
        len(changes(signals, n)) > 2 for n in signals if n.startswith("npu_sim.u_npu.u_dma.")
    )
    whole = read_fst(Path(dev_window_of_everything(srv)))
    assert len(signals) < len(whole) / 4


def dev_window_of_everything(srv: ServerProcess) -> str:
    with Device.open(f"{srv.url}/npu0") as dev:
        dev.transport.start_waves(cycles=100)
        dev.wait_irq(timeout_s=60.0, max_cycles=100)
        return dev.transport.stop_waves().path


def test_cli_signals_and_a_bad_name(waves_server):
    srv, _folder = waves_server
    args = ["waves", "--cycles", "500", "-d", f"{srv.url}/npu0"]
    out = run_cli([*args, "--signals", "npu_sim.u_npu.u_dma"])
    assert out.returncode == 0, out.stderr
    path = re.search(r"(\S+\.fst) \(", out.stdout).group(1)
    assert all(n.startswith("npu_sim.u_npu.u_dma.") for n in read_fst(Path(path)))
    bad = run_cli([*args, "--signals", "npu_sim.u_npu;rm -rf"])
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "'npu_sim.u_npu;rm -rf' is not a hierarchical name" in bad.stderr
