"""The device CLI (`npu-emu devices|regs|mem`) against a real server, and the register
access trace of the server (--trace-registers) and of the runtime (XRT_TRACE_REGISTERS)."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import run_cli

from npuemu.server.launch import ServerProcess

pytestmark = pytest.mark.sim

MAGIC = 0x4E50_5530


@pytest.fixture(scope="module")
def traced_server(tmp_path_factory) -> Iterator[tuple[ServerProcess, Path]]:
    trace = tmp_path_factory.mktemp("regtrace") / "registers.log"
    with ServerProcess.start(devices=2, extra_args=("--trace-registers", str(trace))) as srv:
        yield srv, trace


def test_regs_read_magic_by_name(traced_server):
    srv, trace = traced_server
    out = run_cli(["regs", "read", "npu0", "npu.MAGIC", "--server", srv.address])
    assert out.returncode == 0, out.stderr
    assert re.search(rf"npu\.MAGIC @ 0x40000000 = {MAGIC:#010x}", out.stdout), out.stdout
    # The server logged that read by name, with the simulated cycle.
    lines = trace.read_text().splitlines()
    assert any(
        re.fullmatch(rf"cycle=\d+ npu0 read\s+0x40000000 npu\.MAGIC = {MAGIC:#010x}", ln)
        for ln in lines
    ), lines[-10:]


def test_regs_write_a_register_and_read_a_field(traced_server):
    srv, _ = traced_server
    a = srv.address
    # SCRATCH keeps a value only within one lease (a lease end resets the device), so the
    # write and the read back are checked through what each command prints and the trace.
    w = run_cli(["regs", "write", "npu1", "npu.SCRATCH", "0x1234abcd", "--server", a])
    assert w.returncode == 0, w.stderr
    assert "npu.SCRATCH @ 0x40000" in w.stdout and "<- 0x1234abcd" in w.stdout
    r = run_cli(["regs", "read", "npu1", "npu.TARGET.ID", "--server", a])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("= 0x1"), r.stdout  # Buyi is target 1


def test_regs_dump_shows_absolute_addresses_and_fields(traced_server):
    srv, _ = traced_server
    out = run_cli(["regs", "dump", "npu0", "dma", "--server", srv.address])
    assert out.returncode == 0, out.stderr
    assert re.search(r"^0x80000000 dma\.MAGIC\s+0x", out.stdout, re.M), out.stdout
    assert "dma.STATUS" in out.stdout


def test_bad_names_give_one_line_errors(traced_server):
    srv, _ = traced_server
    for name, words in (
        ("MAGIC", "npu.MAGIC or dma.MAGIC"),
        ("npu.NOPE", "no register 'NOPE'"),
        ("npu.MAGIC.NOPE", "has no field 'NOPE'"),
    ):
        out = run_cli(["regs", "read", "npu0", name, "--server", srv.address])
        assert out.returncode == 2, out
        assert words in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_mem_write_and_read_udma_and_plddr(traced_server, tmp_path):
    srv, _ = traced_server
    a = srv.address
    payload = bytes(range(256)) * 4
    src = tmp_path / "in.bin"
    src.write_bytes(payload)
    w = run_cli(["mem", "write", "npu0", "udma:0x100", "--hex", "de ad be ef", "--server", a])
    assert w.returncode == 0, w.stderr
    assert "4 B -> udma:0x100" in w.stdout
    r = run_cli(["mem", "read", "npu0", "udma:0x100", "4", "--server", a])
    assert r.returncode == 0, r.stderr
    # A lease end clears the memories: the next holder reads zeros, as it must.
    assert "00 00 00 00" in r.stdout, r.stdout
    # plddr is reached through the DMA engine: the runtime's register trace shows the copy
    # programmed to the right place and length.
    w = run_cli(
        ["mem", "write", "npu0", "plddr:0x40", "--in", str(src), "--server", a],
        env={"XRT_TRACE_REGISTERS": "-"},
    )
    assert w.returncode == 0, w.stderr
    assert f"{len(payload)} B -> plddr:0x40 (0x100000040)" in w.stdout
    for reg, value in (("DST_LO", 0x40), ("DST_HI", 1), ("ROW_BYTES", len(payload))):
        assert re.search(rf"write\s+0x8\w+ dma\.{reg} = {value:#010x}", w.stderr), w.stderr


def test_devices_lists_both(traced_server):
    srv, _ = traced_server
    out = run_cli(["devices", "--server", srv.address])
    assert out.returncode == 0, out.stderr
    assert re.search(r"^npu0\s+buyi", out.stdout, re.M) and re.search(
        r"^npu1\s+buyi", out.stdout, re.M
    )
    out = run_cli(["devices", "--server", srv.address, "--json"])
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    assert listing["protocol_version"] == 1
    assert [(d["name"], d["target"], d["state"]) for d in listing["devices"]] == [
        ("npu0", "buyi", "free"),
        ("npu1", "buyi", "free"),
    ]


def test_devices_takes_a_url_and_says_why_it_cannot_connect(traced_server):
    srv, _ = traced_server
    out = run_cli(["devices", "--device", srv.url])  # grpc://HOST:PORT is the server
    assert out.returncode == 0 and re.search(r"^npu0\s+buyi", out.stdout, re.M), out.stderr
    assert out.stderr == ""
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = run_cli(["devices", "-d", f"grpc://127.0.0.1:{port}"])
    assert out.returncode == 1  # a failed operation, as every other command's (xrt.exitcodes)
    assert f"listing the devices of 127.0.0.1:{port}" in out.stderr
    assert "nothing listens at that address and port" in out.stderr
    out = run_cli(["devices", "-d", f"grpc://grpc://127.0.0.1:{port}"])
    assert out.returncode == 2
    assert f"'grpc://grpc://127.0.0.1:{port}' has two schemes" in out.stderr


def test_old_spellings_work_with_one_deprecation_line(traced_server):
    srv, _ = traced_server
    new = run_cli(["regs", "read", "-d", f"{srv.url}/npu1", "npu.MAGIC"])
    assert new.returncode == 0 and "npu.MAGIC @ 0x40000000" in new.stdout, new.stderr
    assert new.stderr == ""
    old = run_cli(["regs", "read", "npu1", "npu.MAGIC", "--server", srv.address])
    assert old.returncode == 0 and old.stdout == new.stdout, old.stderr
    (line,) = old.stderr.splitlines()
    assert f"use --device {srv.url}/npu1" in line and "deprecated" in line
    env = run_cli(["devices", "--json"], env={"XRT_DEVICE": srv.url})  # the default
    assert env.returncode == 0 and json.loads(env.stdout)["devices"][1]["name"] == "npu1"


def test_runtime_register_trace_env(traced_server):
    srv, _ = traced_server
    out = run_cli(
        ["regs", "read", "npu0", "dma.MAGIC", "--server", srv.address],
        env={"XRT_TRACE_REGISTERS": "-"},
    )
    assert out.returncode == 0, out.stderr
    assert re.search(r"cycle=\d+ npu0 read\s+0x80000000 dma\.MAGIC = 0x", out.stderr), out.stderr


def test_version_on_both_commands():
    for module, prog in (("npuemu", "npu-emu"), ("xrt", "xrt")):
        out = run_cli(["--version"], module=module)
        assert out.returncode == 0, out.stderr
        assert re.fullmatch(rf"{prog} \d+\.\d+\.\d+\S*\n", out.stdout), out.stdout


def test_waves_need_a_server_started_with_waves(traced_server):
    srv, _ = traced_server
    out = run_cli(["waves", "npu0", "--cycles", "100", "--server", srv.address])
    assert out.returncode == 1, out
    assert "start the server with --waves DIR" in out.stderr and "Traceback" not in out.stderr


def test_health_reports_serving(traced_server):
    srv, _ = traced_server
    out = run_cli(["health", "--server", srv.address])
    assert out.returncode == 0 and "SERVING" in out.stdout, out
