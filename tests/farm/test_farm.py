"""The farm on loopback with real processes: a labgrid coordinator, two hosts (one
`npu-emu serve` of one ZG330 and one exporter each), the reaper, and jobs as subprocesses
that reserve, acquire, open ``labgrid://+TOKEN``, use the device and give it back."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import GRACE_S, Job

from npuemu.farm.launch import LoopbackFarm, lg_client
from xrt.farm import FarmClient

pytestmark = pytest.mark.sim

OPEN_S = 180.0  # bound on a job's start, reservation and open on a busy machine


def _server_of(url: str) -> str:
    return url.split("//", 1)[1].split("/", 1)[0]


def _device_of(url: str) -> str:
    """``grpc://HOST:PORT/DEVICE?...`` -> ``HOST:PORT/DEVICE``."""
    return url.split("//", 1)[1].split("?", 1)[0]


def test_two_jobs_get_two_devices_and_a_third_waits_for_a_release(farm, jobs) -> None:
    a, b = Job(farm), Job(farm)
    jobs += [a, b]
    ea, eb = a.wait_event("opened", OPEN_S), b.wait_event("opened", OPEN_S)
    print("job a", a.events, "\njob b", b.events)
    assert ea["place"] != eb["place"]
    assert _server_of(ea["url"]) != _server_of(eb["url"])  # two servers, two devices

    c = Job(farm)
    jobs.append(c)
    with FarmClient(farm.coordinator) as client:  # c's reservation is queued, not served
        deadline = time.monotonic() + OPEN_S
        while not any(r.state.name == "waiting" for r in client.reservations()):
            assert time.monotonic() < deadline, "job c made no reservation"
            time.sleep(0.1)
    assert not c.has("opened")
    released = a.give_back()
    ec = c.wait_event("opened", 60)
    assert ec["place"] == ea["place"] and _device_of(ec["url"]) == _device_of(ea["url"])
    print(f"release -> waiting job's open: {ec['t'] - released['t']:.2f} s")
    b.give_back()
    c.give_back()


def test_a_killed_job_frees_its_device_within_the_reapers_grace(farm, jobs, reaper) -> None:
    a, b = Job(farm), Job(farm)
    jobs += [a, b]
    ea = a.wait_event("opened", OPEN_S)
    b.wait_event("opened", OPEN_S)
    killed_at = time.time()
    a.kill()  # SIGKILL: no give-back, labgrid's lock stays; the lease ends with the process
    c = Job(farm)
    jobs.append(c)
    ec = c.wait_event("opened", OPEN_S)
    assert ec["place"] == ea["place"]
    assert reaper.wait_output(rf"released {ea['place']} from", 30)
    print(f"SIGKILL -> device handed out again: {ec['t'] - killed_at:.2f} s (grace {GRACE_S} s)")
    b.give_back()
    c.give_back()


def test_a_real_pytest_lg_env_run_uses_a_farm_device(farm, tmp_path: Path) -> None:
    """The CI job of docs/farm.md: reserve, acquire, `pytest --lg-env`, cancel, release."""
    (tmp_path / "farm.yaml").write_text(
        textwrap.dedent(
            """\
            targets:
              main:
                resources:
                  RemotePlace:
                    name: "+"
                drivers:
                  NpuEmuDriver: {}
            imports:
              - npuemu.farm.resource
            """
        )
    )
    (tmp_path / "test_on_farm.py").write_text(
        textwrap.dedent(
            """\
            def test_npu(target):
                dev = target.get_driver("NpuEmuDriver").device
                dma = dev.get_reg_region("dma")
                dma.write(dma.regs.SCRATCH.address, 0x1234ABCD)
                assert dma.read(dma.regs.SCRATCH.address) == 0x1234ABCD
                assert dev.target == "zg330"
                print("FARM DEVICE", dev.url)
            """
        )
    )
    out = lg_client(farm.coordinator, "reserve", "--wait", "--shell", "target=zg330")
    token = out.split("LG_TOKEN=", 1)[1].split()[0]
    env = {**os.environ, **farm.env, "LG_TOKEN": token}
    with FarmClient(farm.coordinator) as client:
        place = client.place(f"+{token}").name
    try:
        lg_client(farm.coordinator, "-p", "+", "acquire", env=env)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "labgrid",
                "--lg-env",
                "farm.yaml",
                "-s",
                "-q",
                "test_on_farm.py",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        lg_client(farm.coordinator, "cancel-reservation", token, env=env)  # cancel, then
        lg_client(farm.coordinator, "-p", place, "release", env=env)  # release
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    served = {s.address for s in farm.servers}
    urls = [line.split()[-1] for line in run.stdout.splitlines() if "FARM DEVICE" in line]
    assert urls and _server_of(urls[0].replace("grpc://", "//")) in served, run.stdout


def test_labgrid_url_never_acquires_and_says_so(farm) -> None:
    import xrt
    from xrt.errors import XrtError

    place = farm.places[0]
    with pytest.raises(XrtError, match=f"place {place} is not acquired: acquire it first"):
        xrt.Device.open(f"labgrid://{place}?coordinator={farm.coordinator}")
    with FarmClient(farm.coordinator) as client:
        assert client.places[place].acquired is None  # still free: it did not take it
    with pytest.raises(XrtError, match="no place 'nowhere'"):
        xrt.Device.open(f"labgrid://nowhere?coordinator={farm.coordinator}")


def test_a_stopped_servers_device_is_not_handed_out(farm: LoopbackFarm, jobs) -> None:
    """Runs last: it stops the second host's server."""
    holder = Job(farm)
    jobs.append(holder)
    first = holder.wait_event("opened", OPEN_S)  # the live place is held
    dead = next(p for p in farm.places if p != first["place"])
    srv = next(s for s in farm.servers if s.address != _server_of(first["url"]))
    srv.stop()
    with FarmClient(farm.coordinator) as client:  # the exporter notices
        client.wait_for(
            lambda: not any(d.avail for d in client.place_devices(client.places[dead])),
            60,
            f"{dead}'s device unavailable",
        )
    job = Job(farm)
    jobs.append(job)
    t0 = time.monotonic()
    assert job.proc.wait(OPEN_S) != 0  # fails fast, with the reason
    assert f"could not acquire farm place {dead}" in job.stderr
    assert "unavailable" in job.stderr and srv.address in job.stderr
    assert not job.has("opened")
    print(f"job on a dead server's place failed in {time.monotonic() - t0:.2f} s")
    holder.give_back()
