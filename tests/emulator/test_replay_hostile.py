"""``npu-emu replay`` of crafted recordings: a recording is a file users carry, so the
replay treats it as hostile input (issue 38, finding 7).

Every recording here is made with the recording module's own writer (`write_recording`,
`encode_record`) and replayed by ``npu-emu replay`` as a real subprocess, with
``--target buyi`` (so that nothing but the crafted field stands in the way: the header's
model digest is not this checkout's). Each must be answered with ONE line naming the record,
its byte offset, the field and its value, exit status 2, within 60 s and 600 MiB of address
space (RLIMIT_AS; the subprocess timeout is only a guard), leaving nothing behind in the
temporary folder, the working folder or beside the recording.
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from xrt.hw.targets import CLOCK_PERIOD_PS, target
from xrt.recording import FORMAT, MAGIC, encode_record, write_recording

UDMA = target("buyi").memory("udma")
NPU_MAGIC = target("buyi").npu_base  # npu.MAGIC
LIMIT_AS = 600 << 20
GUARD_S = 180  # kills a replay that hangs (today's far-future time and huge wait do)
END = {"k": "end", "reason": "closed by its holder", "requests": 1, "dropped": 0}


def header(**over: Any) -> dict[str, Any]:
    """A recording server's header (as `npuemu.server.recording` writes it)."""
    h = {
        "format": FORMAT,
        "version": 1,
        "target": "buyi",
        "target_id": target("buyi").id,
        "hw_version": "1.0",
        "model": "0123456789abcdef",
        "waves": False,
        "device": "npu0",
        "lease": "00" * 8,
        "holder": "tester",
        "started": 1.7e9,
        "period_ps": CLOCK_PERIOD_PS,
        "max_bytes": 256 << 20,
        "inline_read_bytes": 64 << 10,
    }
    return h | over


def board_header(**over: Any) -> dict[str, Any]:
    """A board session's header (as `xrt.transport.recorder` writes it)."""
    h = header(model=None, lease=None, clock="wall", origin="client", transport="axi")
    del h["period_ps"]
    return h | over


def read_reg(t: int = 0, c: int = 4) -> dict[str, Any]:
    return {
        "k": "request",
        "op": "read_reg",
        "args": {"addr": NPU_MAGIC},
        "reply": {"status": 1, "value": 0x4E505530},
        "t": t,
        "c": c,
    }


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@dataclass
class Run:
    status: int
    lines: list[str]
    wall_s: float
    maxrss_mib: float


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def replay(path: Path, *args: str) -> Run:
    """``npu-emu replay PATH ARGS`` under RLIMIT_AS, with its own temporary and working
    folders beside `path` (tmp/, cwd/: both must stay empty)."""
    tmp, cwd = path.parent / "tmp", path.parent / "cwd"
    tmp.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    out, err = path.parent / "stdout", path.parent / "stderr"
    env = {**os.environ, "XRT_PROGRESS": "0", "TMPDIR": str(tmp)}
    with out.open("w") as o, err.open("w") as e:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "npuemu.cli", "replay", str(path), *args],
            stdout=o,
            stderr=e,
            env=env,
            cwd=cwd,
            preexec_fn=limit_memory,
        )
        guard = threading.Timer(GUARD_S, proc.kill)
        guard.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            guard.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.monotonic() - t0
    lines = [ln for ln in (out.read_text() + err.read_text()).splitlines() if ln.strip()]
    out.unlink()
    err.unlink()
    return Run(proc.returncode, lines, wall_s, usage.ru_maxrss / 1024)


def assert_refused(run: Run, *needles: str) -> str:
    """One line, naming what it must, exit status 2, in bounds; the line."""
    assert run.status == 2 and len(run.lines) == 1, (run.status, run.lines[-12:])
    line = run.lines[0]
    assert line.startswith("npu-emu replay: ") and "Traceback" not in line, line
    for needle in needles:
        assert needle in line, (needle, line)
    assert run.wall_s < 60, run.wall_s
    assert run.maxrss_mib < 600, run.maxrss_mib
    return line


def assert_nothing_left(folder: Path, *kept: str) -> None:
    """Nothing but the recording(s) and two empty folders in `folder`."""
    assert sorted(p.name for p in folder.iterdir()) == sorted({*kept, "tmp", "cwd"})
    assert not any((folder / "tmp").iterdir()) and not any((folder / "cwd").iterdir())


def crafted(tmp_path: Path, head: dict[str, Any], bodies: list[dict[str, Any]]) -> Path:
    path = tmp_path / "crafted.npurec"
    write_recording(path, head, bodies)
    return path


def offsets(path: Path) -> list[int]:
    """The byte offset of every record (the header's first)."""
    data, at, found = path.read_bytes(), len(MAGIC), []
    while at + 8 <= len(data):
        found.append(at)
        at += 8 + struct.unpack_from(">I", data, at)[0]
    return found


# ---------------------------------------------------------------------------- names
@pytest.mark.parametrize("name", ["../../outside", "..", "a/b", "/tmp/x", ".hidden", "x" * 65])
def test_a_device_name_that_is_not_a_plain_name_is_refused(tmp_path: Path, name: str) -> None:
    path = crafted(tmp_path, header(device=name), [read_reg(), END])
    run = replay(path, "--target", "buyi", "--check")
    assert_refused(run, "record 0 at byte offset 8 (the header)", f"device = {name[:60]!r}")
    assert not (tmp_path / "outside").exists()
    assert_nothing_left(tmp_path, path.name)


# ---------------------------------------------------------------------------- time
def test_a_far_future_time_is_refused_at_once(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(), [read_reg(), read_reg(t=10**18, c=10**14), END])
    line = assert_refused(
        replay(path, "--target", "buyi"),
        f"record 2 at byte offset {offsets(path)[2]}",
        "t = 1000000000000000000",
        "--max-cycles",
    )
    assert "budget of 1,073,741,824 cycles" in line
    assert_nothing_left(tmp_path, path.name)


def test_a_time_that_goes_back_is_refused(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(), [read_reg(t=50_000, c=9), read_reg(t=10_000, c=9), END])
    assert_refused(
        replay(path, "--target", "buyi"),
        f"record 2 at byte offset {offsets(path)[2]}",
        "t = 10000: before the previous request's start",
    )


def test_the_time_budget_is_the_flags(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(), [read_reg(t=2_000 * CLOCK_PERIOD_PS, c=2_004), END])
    assert_refused(
        replay(path, "--target", "buyi", "--max-cycles", "1000"),
        "t = 20000000: past the replay's simulated-time budget of 1,000 cycles",
    )


# ---------------------------------------------------------------------------- waits
def test_a_huge_wait_is_refused_at_once(tmp_path: Path) -> None:
    wait = {
        "k": "request",
        "op": "wait_irq",
        "args": {"max_cycles": 1 << 62, "wall_s": 600.0},
        "reply": {"outcome": 2, "waited": 1 << 62},
        "t": 0,
        "c": 1 << 62,
    }
    path = crafted(tmp_path, header(), [wait, END])
    assert_refused(
        replay(path, "--target", "buyi", "--check"),
        f"record 1 at byte offset {offsets(path)[1]}",
        f"reply.waited = {1 << 62}",
        "simulated-time budget",
    )
    assert_nothing_left(tmp_path, path.name)


def test_a_wait_that_waited_more_than_its_limit_is_refused(tmp_path: Path) -> None:
    wait = {
        "k": "request",
        "op": "wait_irq",
        "args": {"max_cycles": 10, "wall_s": 1.0},
        "reply": {"outcome": 1, "waited": 500},
        "t": 0,
        "c": 500,
    }
    path = crafted(tmp_path, header(), [wait, END])
    assert_refused(
        replay(path, "--target", "buyi"), "reply.waited = 500: more than its args.max_cycles 10"
    )


def test_a_poll_that_gave_up_after_more_cycles_than_its_batch_took_is_refused(
    tmp_path: Path,
) -> None:
    batch = {
        "k": "request",
        "op": "batch",
        "args": {"ops": [[3, NPU_MAGIC, 0, 0xFFFFFFFF, 0, 1 << 40]]},  # a poll of 2**40 cycles
        "reply": {"results": [[4, 0x4E505530]]},  # POLL_TIMEOUT
        "t": 0,
        "c": 100,
    }
    path = crafted(tmp_path, header(), [batch, END])
    assert_refused(
        replay(path, "--target", "buyi"),
        f"record 1 at byte offset {offsets(path)[1]}",
        f"args.ops[0][5] = {1 << 40}: the poll gave up after that many, yet its batch took 101",
    )


def test_a_board_wait_that_timed_out_after_years_is_refused_at_once(tmp_path: Path) -> None:
    wait = {
        "k": "request",
        "op": "wait_irq",
        "args": {"timeout_s": 1e8, "max_cycles": None},
        "reply": {"outcome": 3, "waited": None},
        "waited_s": 1e8,
        "t": None,
        "c": None,
        "w": 0.5,
    }
    path = crafted(tmp_path, board_header(), [wait, END])
    assert_refused(
        replay(path, "--target", "buyi", "--check"),
        f"record 1 at byte offset {offsets(path)[1]}",
        "args.timeout_s = 100000000.0",
        "--max-cycles",
    )


# ---------------------------------------------------------------------------- period
@pytest.mark.parametrize("period", [0, -10_000])
def test_a_zero_or_negative_period_is_refused(tmp_path: Path, period: int) -> None:
    path = crafted(tmp_path, header(period_ps=period), [read_reg(), END])
    assert_refused(
        replay(path, "--target", "buyi", "--check"),
        "record 0 at byte offset 8 (the header)",
        f"period_ps = {period}",
    )
    assert_nothing_left(tmp_path, path.name)


def test_a_period_other_than_the_models_is_refused(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(period_ps=CLOCK_PERIOD_PS // 2), [read_reg(), END])
    assert_refused(
        replay(path, "--target", "buyi"),
        f"period_ps = {CLOCK_PERIOD_PS // 2}: the buyi model's clock period is",
    )


# ---------------------------------------------------------------------------- empty
def test_an_empty_frame_is_refused(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(), [])
    with path.open("ab") as f:
        f.write(struct.pack(">II", 0, 0))  # a frame of no bytes (its CRC-32 is 0)
    assert_refused(
        replay(path, "--target", "buyi"),
        f"record 1 at byte offset {offsets(path)[1]} is corrupt: an empty frame",
    )
    assert_nothing_left(tmp_path, path.name)


def test_an_empty_record_is_refused(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(), [])
    with path.open("ab") as f:
        f.write(encode_record({}))  # a map of no fields: no kind
    assert_refused(replay(path, "--target", "buyi"), "is corrupt: not a record (no kind)")


def test_a_memory_read_of_no_bytes_with_data_is_refused(tmp_path: Path) -> None:
    body = {"k": "memory_read", "address": UDMA.base, "n": 0, "data": b"x"}
    path = crafted(tmp_path, header(), [body, END])
    assert_refused(
        replay(path, "--target", "buyi", "--check"),
        f"record 1 at byte offset {offsets(path)[1]} is malformed: data = 1 bytes: n says 0",
    )


# ---------------------------------------------------------------------------- nesting
def test_a_deeply_nested_field_is_refused(tmp_path: Path) -> None:
    batch = {
        "k": "request",
        "op": "batch",
        "args": {"ops": nested(500)},
        "reply": {"results": []},
        "t": 0,
        "c": 5,
    }
    path = crafted(tmp_path, header(), [batch, END])
    assert_refused(
        replay(path, "--target", "buyi", "--check"),
        f"record 1 at byte offset {offsets(path)[1]} is malformed",
        "args.ops[0] = a list of 1: must be a list of 6",
    )
    assert_nothing_left(tmp_path, path.name)


def test_nesting_deeper_than_msgpack_allows_is_refused(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(), [])
    payload = b"\x82\xa1k\xa9truncated\xa8requests" + b"\x91" * 5000 + b"\x00"
    with path.open("ab") as f:
        f.write(struct.pack(">II", len(payload), zlib.crc32(payload)) + payload)
    assert_refused(replay(path, "--target", "buyi"), "record 1 at byte offset", "undecodable")


def test_the_listing_of_a_deeply_nested_record_is_refused(tmp_path: Path) -> None:
    truncated = {"k": "truncated", "requests": nested(900), "bytes": 1, "limit": 1}
    path = crafted(tmp_path, header(), [truncated, END])
    assert_refused(replay(path, "--list"), "record 1 at byte offset", "requests = a list of 1")


# ---------------------------------------------------------------------------- sizes
def test_a_frame_longer_than_any_record_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(), [])
    with path.open("ab") as f:
        f.write(struct.pack(">II", (1 << 30) - 1, 0) + b"\x80" * 16)
    for args in (("--target", "buyi"), ("--list",)):
        assert_refused(
            replay(path, *args),
            f"record 1 at byte offset {offsets(path)[1]} is corrupt",
            "its length 1,073,741,823 is more than any record may hold",
        )
    assert_nothing_left(tmp_path, path.name)


def test_a_memory_write_larger_than_host_visible_memory_is_refused(tmp_path: Path) -> None:
    write = {"k": "memory_write", "address": UDMA.base, "data": bytes(UDMA.size + 1)}
    path = crafted(tmp_path, header(), [write, END])
    assert_refused(
        replay(path, "--target", "buyi", "--check"),
        f"record 1 at byte offset {offsets(path)[1]} is malformed",
        f"data = {UDMA.size + 1:,} bytes: more than the target's host-visible memory",
    )


def test_a_memory_write_outside_host_visible_memory_is_refused(tmp_path: Path) -> None:
    write = {"k": "memory_write", "address": UDMA.end - 2, "data": b"abcd"}
    path = crafted(tmp_path, header(), [write, END])
    assert_refused(replay(path, "--target", "buyi"), f"address = {UDMA.end - 2}", "outside")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"k": "memory_read", "address": UDMA.base, "n": 1 << 40, "sha256": "0" * 64}, "n = "),
        ({"k": "worker_restart", "why": "x" * 5000}, "is corrupt: undecodable"),
        (read_reg() | {"args": {"addr": -4}}, "args.addr = -4: must be from 0 to"),
        (read_reg() | {"args": {"addr": 0x1234}}, "args.addr = 4660: not a 4-byte aligned"),
        (read_reg() | {"reply": {"status": 9, "value": 0}}, "reply.status = 9"),
        (read_reg() | {"extra": 1}, "'extra' = 1: is not a field of this record"),
        (
            {"k": "request", "op": "batch", "args": {"ops": [[0, NPU_MAGIC, 0, 0, 0, 0]] * 5000}},
            "is corrupt: undecodable",
        ),
    ],
    ids=["n", "why", "addr-negative", "addr-align", "status", "unknown-field", "rows"],
)
def test_oversized_or_out_of_range_fields_are_refused(
    tmp_path: Path, body: dict[str, Any], needle: str
) -> None:
    path = crafted(tmp_path, header(), [body, END])
    assert_refused(replay(path, "--target", "buyi"), "record 1 at byte offset", needle)


def test_a_header_field_too_long_is_refused(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(holder="h" * 300), [END])
    assert_refused(replay(path, "--list"), "the header", "holder = 'hhh", "at most 256")


# ---------------------------------------------------------------------------- budgets
def replay_on_the_simulator(path: Path, *args: str) -> tuple[int, list[str]]:
    """``npu-emu replay`` that starts the simulator (no RLIMIT_AS: the worker maps the
    device's memories); its exit status and output lines."""
    done = subprocess.run(
        [sys.executable, "-m", "npuemu.cli", "replay", str(path), *args],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        env={**os.environ, "XRT_PROGRESS": "0"},
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()


@pytest.mark.sim
def test_a_board_wait_that_never_comes_stops_at_the_cycle_budget(tmp_path: Path) -> None:
    """A board wait the recording says saw its interrupt (so it runs with its own limit,
    10 s = 10,000,000 cycles), on a device that never raises it: the replay stops where the
    budget runs out, naming the request and the flag."""
    wait = {
        "k": "request",
        "op": "wait_irq",
        "args": {"timeout_s": 10.0, "max_cycles": None},
        "reply": {"outcome": 1, "waited": None},
        "waited_s": 0.001,
        "t": None,
        "c": None,
        "w": 0.5,
    }
    path = crafted(tmp_path, board_header(), [wait, END])
    status, lines = replay_on_the_simulator(path, "--max-cycles", "20000")
    assert status == 2 and len(lines) == 1, (status, lines)
    assert "request #0 (wait_irq) at record 1" in lines[0], lines
    assert "simulated-time budget of 20,000 cycles (--max-cycles raises it)" in lines[0]


@pytest.mark.sim
def test_the_wall_time_budget_ends_the_replay(tmp_path: Path) -> None:
    path = crafted(tmp_path, header(), [read_reg(), END])
    status, lines = replay_on_the_simulator(path, "--target", "buyi", "--max-wall-s", "0.2")
    assert status == 1 and len(lines) == 1, (status, lines)
    assert "wall-time budget of 0.2 s ran out (--max-wall-s raises it)" in lines[0], lines
