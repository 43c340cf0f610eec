"""The debugger through a real ``npu-emu serve`` on loopback (docs/debugging.md,
"Debugger"): a stop outlasts the server's watchdog and the lease's time-to-live while the
holder keeps its lease, a lease's end clears the breakpoints and frees a stopped device,
and ``npu-emu debug`` runs as a subprocess from a breakpoint on the engine's start register
to a bit-exact end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xrt import Device, Session
from xrt.backend import HostBackend
from xrt.hw.debug import StopReason
from xrt.npu_device import NpuDevice

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from network_run import Run, quantized_small_cnn

pytestmark = pytest.mark.sim

STOP_S = 120.0
WATCHDOG_S = 3.0  # the server's: a stop outlasts it
LEASE_TTL_S = 2.0


@pytest.fixture(scope="module")
def network() -> tuple:
    return quantized_small_cnn()


@pytest.fixture(scope="module", params=["buyi", "zg330"])
def server(request: pytest.FixtureRequest) -> Iterator[Any]:
    from npuemu.server.launch import ServerProcess

    with ServerProcess.start(
        devices=1,
        target=request.param,
        lease_ttl_s=LEASE_TTL_S,
        extra_args=("--watchdog", str(WATCHDOG_S)),
    ) as srv:
        srv.npu_target = request.param  # type: ignore[attr-defined]
        yield srv


def _session(dev: NpuDevice, net: Any) -> Session:
    from xrt.backend import BuyiBackend, ZG330Backend

    backend = BuyiBackend if dev.target == "buyi" else ZG330Backend
    return Session.create([backend, HostBackend], net, [dev, None]).apply()


def test_a_stop_outlasts_the_watchdog_and_the_lease_ttl_then_finishes_bit_exact(
    server: Any, network: tuple
) -> None:
    net, feeds, want = network
    dev = Device.open(server.url)
    assert isinstance(dev, NpuDevice)
    try:
        with _session(dev, net) as sess:
            dbg = dev.debugger
            dbg.break_at(register="CORE_CTRL", access="write")
            run = Run(sess, feeds)
            stop = dbg.wait_stopped(STOP_S)
            assert stop.reason == StopReason.BREAKPOINT
            # Hold the stop for longer than the server's watchdog and the lease's TTL: the
            # holder keeps answering keepalives; the device's silence does not count.
            threading.Event().wait(2 * WATCHDOG_S)
            state = dbg.engine_state()
            assert state.stopped and state.cycle == stop.cycle
            assert run.thread.is_alive() and run.error is None
            assert dbg.step(instructions=2).pc == 1
            dbg.delete()
            dbg.continue_()
            run.thread.join(STOP_S)
            assert run.error is None, run.error
            assert run.out is not None
            for got, w in zip(run.out, want, strict=True):
                np.testing.assert_array_equal(got, w)
    finally:
        dev.close()


def test_a_lease_end_clears_the_breakpoints_and_frees_a_stopped_device(
    server: Any, network: tuple
) -> None:
    net, feeds, want = network
    dev = Device.open(server.url)
    assert isinstance(dev, NpuDevice)
    sess = _session(dev, net)
    dev.debugger.break_at(insn=0)
    dev.debugger.break_at(irq=True)
    run = Run(sess, feeds)
    dev.debugger.wait_stopped(STOP_S)
    dev.close()  # the lease ends with the device stopped and the runtime's request in flight
    run.thread.join(STOP_S)
    assert not run.thread.is_alive() and run.error is not None
    nxt = Device.open(server.url)
    assert isinstance(nxt, NpuDevice)
    try:
        assert nxt.debugger.breakpoints() == [] and not nxt.debugger.stopped
        with _session(nxt, net) as again:
            for got, w in zip(again.forward(feeds), want, strict=True):
                np.testing.assert_array_equal(got.numpy(), w)
    finally:
        nxt.close()


@pytest.fixture(scope="module", params=["buyi", "zg330"])
def waves_server(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[Any]:
    from npuemu.server.launch import ServerProcess

    folder = tmp_path_factory.mktemp("waves")
    with ServerProcess.start(
        devices=1, target=request.param, extra_args=("--waves", str(folder))
    ) as srv:
        yield srv


def test_waves_around_a_stop_hold_the_cycles_before_and_after_it(
    waves_server: Any, network: tuple, tmp_path: Path
) -> None:
    net, feeds, want = network
    dev = Device.open(waves_server.url)
    assert isinstance(dev, NpuDevice)
    try:
        with _session(dev, net) as sess:
            dbg = dev.debugger
            start = dbg.engine_state().cycle
            dbg.waves_on()  # the cycles before the stop need tracing on before it
            dbg.break_at(insn=3)
            run = Run(sess, feeds)
            stop = dbg.wait_stopped(STOP_S)
            window = dbg.waves(tmp_path / "stop.fst", after=50)
            assert window.first_cycle <= start < stop.cycle
            assert window.last_cycle >= stop.cycle + 50 - 1
            assert dbg.engine_state().cycle == stop.cycle + 50
            data = (tmp_path / "stop.fst").read_bytes()
            assert len(data) > 1000 and window.path == str(tmp_path / "stop.fst")
            dbg.delete()
            dbg.continue_()
            run.thread.join(STOP_S)
            assert run.error is None, run.error
            assert run.out is not None
            for got, w in zip(run.out, want, strict=True):
                np.testing.assert_array_equal(got, w)
    finally:
        dev.close()


SCRIPT = """\
break reg CORE_CTRL write
info breakpoints
run
info engine
step
step 2
info engine
stepi 10
x/4x {udma:#x}
delete
continue
quit
"""


def test_npu_emu_debug_runs_a_script_from_a_breakpoint_to_a_bit_exact_end(
    server: Any, network: tuple, tmp_path: Path
) -> None:
    from xrt.hw.targets import target as target_config

    net, _, _ = network
    net_file = tmp_path / "small_cnn.json"
    net.save(net_file)
    script = tmp_path / "session.gdb"
    udma = target_config(server.npu_target).memory("udma").base
    script.write_text(SCRIPT.format(udma=udma))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "npuemu.cli",
            "debug",
            "-d",
            server.url,
            str(net_file),
            "-x",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "XRT_PROGRESS": "0"},
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    point = re.search(r"^Breakpoint (\d+): register 0x[0-9a-f]+ write$", out, re.M)
    assert point is not None, out
    assert f"Breakpoint {point[1]} at cycle" in out, out
    # step: the engine's instruction index advances one, then two.
    assert "Stopped (step) at cycle" in out and ": instruction 0" in out, out
    assert ": instruction 2" in out, out
    assert "decode     instruction 2" in out, out
    assert f"{udma:#x}: 0x" in out, out
    assert (
        "The network finished: 1 output(s)" in out and "bit-exact with the host backend" in out
    ), out
