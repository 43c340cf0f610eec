"""The farm on loopback with real processes: a labgrid coordinator, two hosts (one
`npu-emu serve` of one ZG330 and one exporter each), the reaper, and jobs as subprocesses
that reserve, acquire, open ``labgrid://+TOKEN``, use the device and give it back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from npuemu.farm.launch import FarmJob as Job
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
    start = next(e for e in a.events if e["event"] == "giving_back")
    print(
        f"give-back started / done -> waiting job's open: {ec['t'] - start['t']:.2f} s / "
        f"{ec['t'] - released['t']:.2f} s"
    )
    b.give_back()
    c.give_back()


def test_farm_status_as_json(farm: LoopbackFarm) -> None:
    """``npu-emu-farm status --json``: every place, its tags and its devices, for scripts."""
    out = subprocess.run(
        [sys.executable, "-m", "npuemu.farm.cli", "status", "-c", farm.coordinator, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **farm.env},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["coordinator"].endswith(farm.coordinator.rsplit(":", 1)[1])
    assert len(doc["places"]) == 2
    for place in doc["places"]:
        assert place["tags"]["target"] == "zg330"
        (device,) = place["devices"]
        assert device["url"].startswith("grpc://") and device["target"] == "zg330"
        assert device["available"] is True


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
    grace = reaper.match.string.rsplit("grace", 1)[-1].strip()  # its first line says it
    print(f"SIGKILL -> device handed out again: {ec['t'] - killed_at:.2f} s (grace {grace})")
    b.give_back()
    c.give_back()


def test_a_job_exits_after_giving_back_whenever_grpcs_request_thread_runs(farm, jobs) -> None:
    """Issue 38, finding 9: a job sent 'released' and never exited. gRPC's request thread of
    its coordinator stream, starved until FarmClient.close() had returned (a loaded machine
    does that now and then), took the call's lock and was killed holding it as the job
    exited; the finalizer then collected the call, whose __del__ takes that lock. Here that
    schedule is forced (tests/farm/starve_grpc.py): close() must wait for the thread."""
    job = Job(farm, launcher=[str(Path(__file__).with_name("starve_grpc.py"))])
    jobs.append(job)
    job.wait_event("opened", OPEN_S)
    job.give_back(60)  # a job that is still running then is reported with its stacks
    assert "starve_grpc: the request thread holds its call's lock" in job.stderr  # forced


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


def test_the_farm_device_fixture_holds_a_device_and_gives_it_back(farm, tmp_path: Path) -> None:
    (tmp_path / "test_fixture.py").write_text(
        textwrap.dedent(
            """\
            def test_npu(farm_device):
                dma = farm_device.get_reg_region("dma")
                dma.write(dma.regs.SCRATCH.address, 7)
                assert dma.read(dma.regs.SCRATCH.address) == 7
                print("FARM DEVICE", farm_device.url)
            """
        )
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--farm-tags",
            "target=zg330",
            "-s",
            "-q",
            "test_fixture.py",
        ],
        cwd=tmp_path,
        env={**os.environ, **farm.env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    assert "FARM DEVICE grpc://" in run.stdout
    with FarmClient(farm.coordinator) as client:  # given back: no place held, no reservation
        assert not any(p.acquired or p.reservation for p in client.places.values())
        assert client.reservations() == []


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


def _stop_the_other_server(farm: LoopbackFarm, held: dict) -> tuple[str, str]:
    """Stop the server of the place `held` does not hold (if still running); wait until
    its exporter says so. Returns that place and the server's address."""
    dead = next(p for p in farm.places if p != held["place"])
    srv = next(s for s in farm.servers if s.address != _server_of(held["url"]))
    srv.stop()
    with FarmClient(farm.coordinator) as client:
        client.wait_for(
            lambda: not any(d.avail for d in client.place_devices(client.places[dead])),
            60,
            f"{dead}'s device unavailable",
        )
    return dead, srv.address


def test_a_stopped_servers_place_fails_fast_without_the_reaper(farm: LoopbackFarm, jobs) -> None:
    """Stops the second host's server: the tests after this one find it stopped."""
    holder = Job(farm)
    jobs.append(holder)
    dead, address = _stop_the_other_server(farm, holder.wait_event("opened", OPEN_S))
    job = Job(farm)  # labgrid's scheduler gives it the dead place; the exporter refuses it
    jobs.append(job)
    t0 = time.monotonic()
    assert job.proc.wait(OPEN_S) != 0
    assert f"could not acquire farm place {dead}" in job.stderr
    assert f"is unavailable: server {address} does not answer" in job.stderr
    assert not job.has("opened")
    print(f"job on a dead server's place failed in {time.monotonic() - t0:.2f} s")
    holder.give_back()


def test_the_reaper_keeps_a_dead_servers_place_out_of_the_scheduler(
    farm: LoopbackFarm, jobs, reaper
) -> None:
    holder = Job(farm)
    jobs.append(holder)
    held = holder.wait_event("opened", OPEN_S)
    dead, _ = _stop_the_other_server(farm, held)
    assert reaper.wait_output(rf"quarantined {dead}", 60)
    job = Job(farm)
    jobs.append(job)
    with FarmClient(farm.coordinator) as client:  # queued behind the live place
        deadline = time.monotonic() + OPEN_S
        while not any(r.state.name == "waiting" for r in client.reservations()):
            assert time.monotonic() < deadline, "the job made no reservation"
            time.sleep(0.1)
    assert job.proc.poll() is None and not job.has("opened")
    holder.give_back()
    assert job.wait_event("opened", 60)["place"] == held["place"]  # the live one
    job.give_back()


def test_a_place_whose_exporter_is_gone_is_quarantined(farm: LoopbackFarm, reaper) -> None:
    """Runs last: it stops an exporter."""
    host = next(i for i, srv in enumerate(farm.servers) if srv.proc.poll() is None)
    farm.exporters[host].stop()  # its resources vanish from the coordinator
    assert reaper.wait_output(rf"quarantined {farm.places[host]}", 60)
    with FarmClient(farm.coordinator) as client:
        assert client.places[farm.places[host]].reservation is not None


def test_a_job_whose_give_back_fails_is_reported_as_ended_not_as_hung() -> None:
    """A give-back that fails (here: the coordinator is gone) ends the job with a traceback;
    the report must say that it ended, with what status and why, at once. (It used to say
    "sent no 'released' in 120 s", often without the traceback, and then ask py-spy for the
    stacks of a process that no longer existed: a fast failure read as a 120 s hang.)"""
    with LoopbackFarm.start(hosts=1, target="zg330", grace_s=None) as farm:
        job = Job(farm)
        try:
            job.wait_event("opened", OPEN_S)
            farm.coordinator_proc.stop()
            with pytest.raises(AssertionError) as failed:
                job.give_back()
        finally:
            job.stop()
    report = str(failed.value)
    assert f"job {job.proc.pid} exited with status 1" in report, report
    assert "without sending 'released'" in report, report
    assert "'giving_back'" in report, report  # the events it did send
    assert "Traceback (most recent call last)" in report, report  # all of its stderr
    assert "CancelReservation" in report, report  # the call that failed, from its traceback
    assert "still running" not in report and "where job" not in report, report
