"""The exit-status table of docs/debugging.md stays true: it lists every status
`xrt.exitcodes` defines, and each is provoked here with the real command in a subprocess,
its ``--json`` error (where there is one) a valid ``{"error": {"code", "message"}}``
document; Ctrl-C ends a waiting command with 130 and no traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import run_cli
from onnx import helper

from xrt import exitcodes

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "network"))

from netutil import make_model  # noqa: E402


def _table() -> dict[int, str]:
    """The statuses of docs/debugging.md's "Exit status" table, with their meanings."""
    text = (REPO / "docs" / "debugging.md").read_text()
    section = text.split("\n## Exit status\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.MULTILINE)
    return {int(status): meaning for status, meaning in rows}


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _error(out: subprocess.CompletedProcess[str], code: int) -> dict[str, object]:
    """The JSON error document of a failed ``--json`` command, checked against `code`."""
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    doc = json.loads(out.stdout)
    err = doc["error"]
    assert err["code"] == exitcodes.name_of(code) and err["exit_status"] == code, doc
    assert isinstance(err["message"], str) and err["message"], doc
    return err


def test_the_table_lists_every_status_the_code_defines() -> None:
    table = _table()
    assert set(table) == set(exitcodes.CODES.values()), (sorted(table), exitcodes.CODES)
    for name, code in exitcodes.CODES.items():
        assert exitcodes.name_of(code) == name
        assert f"`{name}`" in table[code], f"the row of {code} must name it `{name}` (--json)"


def test_bad_input_names_the_url_and_what_was_expected() -> None:
    for argv in (
        ["devices", "--device", "grpc://grpc://127.0.0.1:50051", "--json"],
        ["regs", "read", "npu.MAGIC", "-d", "nosuch://x", "--json"],
        ["wait", "-d", "grpc://localhost", "--json"],
    ):
        err = _error(run_cli(argv), exitcodes.BAD_INPUT)
        assert argv[argv.index("--device" if "--device" in argv else "-d") + 1] in str(
            err["message"]
        )
        assert err["xrt_error"] in (11003, 11010)
    out = run_cli(["run", "m.onnx", "-d", "grpc://grpc://h:1"], module="xrt")
    assert out.returncode == exitcodes.BAD_INPUT and out.stdout == ""
    assert "'grpc://grpc://h:1' has two schemes" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    usage = run_cli(["regs", "read", "--json"])  # argparse's own errors too
    assert "required" in str(_error(usage, exitcodes.BAD_INPUT)["message"])


def test_failed_when_the_server_is_not_there() -> None:
    port = _closed_port()
    err = _error(run_cli(["devices", "-d", f"grpc://127.0.0.1:{port}", "--json"]), 1)
    assert "nothing listens" in str(err["message"])
    health = run_cli(["health", "-d", f"grpc://127.0.0.1:{port}", "--json"])
    _error(health, exitcodes.FAILED)


def test_timed_out_waiting() -> None:
    port = _closed_port()
    out = run_cli(["wait", "-d", f"grpc://127.0.0.1:{port}", "--timeout", "0.2", "--json"])
    assert "within 0.2 s" in str(_error(out, exitcodes.TIMED_OUT)["message"])


def test_placement_refused_by_require_npu(tmp_path: Path) -> None:
    """``xrt compile --require-npu`` (no device needed): a Sub has no NPU lowering."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3 for _ in range(2))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Sub", ["a", "b"], ["y"]),
    ]
    model = tmp_path / "with_sub.onnx"
    onnx.save(make_model(nodes, {"x": [1, 3, 8, 8]}, ["y"], {"w1": w1, "w2": w2}), model)
    out = run_cli(
        [
            *("compile", str(model), "--target", "buyi", "--quantize", "--calib", "1"),
            *("--require-npu", "-o", str(tmp_path / "m.xrtc"), "--json"),
        ],
        module="xrt",
    )
    assert "host" in str(_error(out, exitcodes.PLACEMENT)["message"])
    assert not (tmp_path / "m.xrtc").exists()


@pytest.mark.sim
def test_ok_and_broken_pipe_on_the_embedded_device() -> None:
    out = run_cli(["regs", "read", "npu.MAGIC", "-d", "sim://buyi", "--json"])
    assert out.returncode == exitcodes.OK, out.stderr
    assert json.loads(out.stdout)["value"] == 0x4E50_5530
    read, write = os.pipe()
    os.close(read)  # the reader went away before the first line
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "npuemu", "regs", "read", "npu.MAGIC", "-d", "sim://buyi"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        os.close(write)
    assert proc.returncode == exitcodes.BROKEN_PIPE, proc.stderr
    assert "Traceback" not in proc.stderr and "Broken" not in proc.stderr, proc.stderr


def test_ctrl_c_while_waiting_ends_with_130_and_no_traceback() -> None:
    """SIGINT to `npu-emu wait` waiting for a server that does not listen yet."""
    port = _closed_port()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "npuemu", "wait", "-d", f"grpc://127.0.0.1:{port}"),
            *("--timeout", "600", "--json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A suite started as a background job (`make test &`, nohup) has SIGINT ignored,
        # and a child inherits that: its Ctrl-C would never arrive. One signal call.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "...: waiting": it is inside the wait now
        assert "waiting" in line, line
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == exitcodes.INTERRUPTED, (out, err)
    assert "Traceback" not in err, err
    assert json.loads(out)["error"]["code"] == "interrupted"
