"""Every shell command shown in README.md and docs/ runs, as written, against real servers.

The docs label each fenced block (docs/testing.md, "Examples in the docs are run"):

- ``sh``: commands; every line runs (one bash script per block, ``set -euo pipefail``).
- ``console``: lines starting ``$ `` run; the other lines are their output (not compared).
- ``text`` (synopses, diagrams, formulas, output) and other languages: not run here.
- ``<!-- not run: REASON -->`` on the line before a ``sh`` or ``console`` block: shown, not
  run, for the reason given (make test itself, docker, a board, a labgrid farm, ...).

An unlabelled block fails the test, so a new example is either run or says why not.

How a block runs: in a scratch folder holding ``model.onnx`` (a 1x1 convolution and a
ReLU); ``/tmp/`` in a command means the scratch folder's ``tmp/``, and ``.venv/bin/`` the
test's own environment. A line ``npu-emu serve ...`` (with or without ``&``) starts that
server in the background on a free port (``--port N`` and ``--metrics-port M`` become
``0``); later mentions of ``127.0.0.1:N`` and ``127.0.0.1:M``
name the real ports, and ``XRT_DEVICE`` names it. A block with no server of its own gets
the test's shared one (two Buyi devices) as ``XRT_DEVICE`` and at ``127.0.0.1:50051``.
A command whose comment starts ``# exit N`` must exit with N. Servers are stopped (SIGTERM,
then waited for) when the block ends, however it ends.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from npuemu.server.launch import ServerProcess

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LABELS = ("sh", "console")
SERVED_DEFAULT_PORT = 50051
BLOCK_TIMEOUT_S = 600  # a cold traced-model build included; the blocks take seconds each

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(\S.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence
    label: str
    text: str
    not_run: str  # the reason, or ""

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[str]:
        """The block's command lines, continuation lines joined."""
        lines = self.text.splitlines()
        if self.label == "console":
            lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
        joined: list[str] = []
        for ln in lines:
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1] + " " + ln.strip()
            elif ln.strip():
                joined.append(ln)
        return joined


def doc_blocks() -> list[Block]:
    blocks = []
    for doc in DOCS:
        text = doc.read_text()
        for m in _FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            reason = _NOT_RUN.search(before)
            blocks.append(
                Block(doc, line, m.group(1).strip(), m.group(2), reason.group(1) if reason else "")
            )
    return blocks


BLOCKS = doc_blocks()
RUNNABLE = [b for b in BLOCKS if b.label in SHELL_LABELS and not b.not_run]


def test_every_fenced_block_is_labelled() -> None:
    unlabelled = [b.where for b in BLOCKS if not b.label]
    assert not unlabelled, (
        "label these blocks sh (commands, run by this test), console ($ lines run), or "
        f"text (not commands): {unlabelled}"
    )
    stray = [b.where for b in BLOCKS if b.not_run and b.label not in SHELL_LABELS]
    assert not stray, f"'not run' marks a command block only: {stray}"
    assert len(RUNNABLE) >= 8  # the examples a newcomer runs first are among them


def _rewrite_serve(tokens: list[str], index: int) -> tuple[list[str], dict[int, str]]:
    """The lines that start server `index` in the background, and the ports it replaces."""
    ports = {}
    out = []
    i = 0
    port = SERVED_DEFAULT_PORT
    while i < len(tokens):
        tok = tokens[i]
        if tok == "&":
            i += 1
            continue
        if tok in ("--port", "--metrics-port") and i + 1 < len(tokens):
            if tok == "--port":
                port = int(tokens[i + 1])
            else:
                ports[int(tokens[i + 1])] = f"METRICS_{index}"
            out += [tok, "0"]
            i += 2
            continue
        out.append(tok)
        i += 1
    if "--port" not in tokens:
        out += ["--port", "0"]
    ports[port] = f"ADDR_{index}"
    log = f".doc-server-{index}.log"
    if "--port-file" in out:  # the block's own (the readiness example)
        url_file = out[out.index("--port-file") + 1]
    else:
        url_file = f".doc-server-{index}.url"
        out += ["--port-file", url_file]
    command = shlex.join([*out, "--drain", "0", "--shutdown-grace", "2"])
    # Ready when the port file appears; a server that exits first fails the block at once
    # (bash's wait -n returns with whichever process ends first).
    script = [
        f"{command} >{log} 2>&1 &",
        f"SERVER_{index}=$!; DOC_PIDS+=($SERVER_{index})",
        f"npu-emu wait --port-file {url_file} --timeout 600 >/dev/null & WAITER=$!",
        f"wait -n $SERVER_{index} $WAITER || true",
        f'kill -0 $SERVER_{index} 2>/dev/null || {{ echo "the server exited:" >&2; '
        f"cat {log} >&2; exit 91; }}",
        "wait $WAITER",
        f'URL_{index}=$(cat {url_file}); ADDR_{index}="${{URL_{index}#grpc://}}"',
        f'export XRT_DEVICE="$URL_{index}" NPU_EMU_SERVER="$ADDR_{index}"',
    ]
    if any(v.startswith("METRICS_") for v in ports.values()):
        script.append(
            f"METRICS_{index}=$(sed -n 's|.*metrics on http://\\([^/]*\\)/metrics.*|\\1|p' {log})"
        )
    return script, ports


def block_script(block: Block) -> str:
    """The bash script that runs `block` (see the module docstring)."""
    lines = [
        "set -euo pipefail",
        "DOC_PIDS=()",
        'stop_servers() { for p in "${DOC_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; '
        'wait "$p" 2>/dev/null || true; done; }',
        "trap stop_servers EXIT",
        "mkdir -p tmp",
    ]
    ports: dict[int, str] = {SERVED_DEFAULT_PORT: "SHARED_ADDR"}
    servers = 0
    for command in block.commands():
        code_part = command.split(" #", 1)[0] if not command.lstrip().startswith("#") else ""
        comment = command[len(code_part) :]
        if not code_part.strip():
            continue
        code_part = re.sub(r"(?<![\w.])/tmp/", "tmp/", code_part)
        code_part = re.sub(r"(?<![\w/])\.venv/bin/", '"$VENV_BIN"/', code_part)
        tokens = shlex.split(code_part)
        if tokens[:2] == ["npu-emu", "serve"]:
            servers += 1
            script, new_ports = _rewrite_serve(tokens, servers)
            ports.update(new_ports)
            lines += script
            continue
        for port, var in ports.items():
            code_part = code_part.replace(f"127.0.0.1:{port}", f"${{{var}}}")
        expect = re.match(r"\s*#\s*exit (\d+)", comment)
        if expect:
            lines += [
                f"set +e; {code_part}; rc=$?; set -e",
                f'[ "$rc" = {expect.group(1)} ] || {{ echo "expected exit {expect.group(1)}, '
                f'got $rc: {shlex.quote(code_part)}" >&2; exit 90; }}',
            ]
        else:
            lines.append(code_part)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ServerProcess]:
    with ServerProcess.start(devices=2) as srv:
        yield srv


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs' ``model.onnx``: a 1x1 convolution and a ReLU, whole on the NPU once
    quantized (and no max-pool to mask the one bit ``--fault bitflip`` flips)."""
    w = np.random.default_rng(0).standard_normal((16, 16, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 4, 4])],
        [helper.make_tensor("w", TensorProto.FLOAT, list(w.shape), w.ravel())],
    )
    path = tmp_path_factory.mktemp("doc-model") / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.mark.sim
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_doc_block_runs(
    block: Block, shared_server: ServerProcess, model_file: Path, tmp_path: Path
) -> None:
    (tmp_path / "model.onnx").write_bytes(model_file.read_bytes())
    script = block_script(block)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XRT_", "NPU_EMU_TOKEN"))}
    venv_bin = str(Path(sys.executable).parent)
    env.update(
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        XRT_DEVICE=shared_server.url,
        NPU_EMU_SERVER=shared_server.address,
        SHARED_ADDR=shared_server.address,
        XRT_PROGRESS="0",
        REPO=str(REPO),
        VENV_BIN=venv_bin,
    )
    # A session of its own: on a time-out the whole block (its servers too) is killed.
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
        for p in tmp_path.glob(".doc-server-*.log")
    )
    assert done.returncode == 0, (
        f"{block.where} failed (exit {done.returncode})\n--- script\n{script}"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}{logs}"
    )


def test_the_runner_rewrites_servers_ports_and_tmp() -> None:
    block = Block(
        REPO / "docs" / "x.md",
        1,
        "sh",
        "npu-emu serve --port 50061 --metrics-port 9464 &   # host1\n"
        "npu-emu devices --server 127.0.0.1:50061\n"
        "curl -s http://127.0.0.1:9464/metrics | grep x\n"
        "xrt run model.onnx --fault dma-error   # exit 1: XrtError 11014\n"
        "npu-emu serve --waves /tmp/waves\n",
        "",
    )
    script = block_script(block)
    assert "--port 0 --metrics-port 0 --port-file .doc-server-1.url" in script
    assert "npu-emu devices --server ${ADDR_1}" in script
    assert "http://${METRICS_1}/metrics" in script
    assert '[ "$rc" = 1 ]' in script
    assert "--waves tmp/waves" in script and ".doc-server-2.url" in script
