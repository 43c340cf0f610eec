"""A board session recorded client-side (`xrt.transport.recorder`) and replayed on the
simulator (``npu-emu replay --check``), with a real server, its worker and the replay as a
real subprocess.

The "board" is board-like: the recorder runs every register access one at a time and every
poll as a loop of reads on the host, as an ``axi://`` device does; here the accesses reach
an ``npu-emu serve`` device instead of /dev/mem (no board in CI). Its driver sequence (the
runtime's plddr staging and copies through the DMA engine, a transfer polled to its end)
replays bit-exact on a fresh simulated device; one altered response is reported at exactly
its request; a poll of many reads is one record.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from npuemu.server.launch import ServerProcess
from xrt.hw import dma
from xrt.hw.regs import DMA
from xrt.npu_device import open_device
from xrt.recording import Kind, read_recording, write_recording
from xrt.transport.grpc import GrpcTransport
from xrt.transport.recorder import RecordingTransport

pytestmark = pytest.mark.sim

COPY = 300_001  # staged through the bounce buffer, read back as a digest (> 64 KiB)
BIG = 4 << 20  # a transfer long enough that polling it takes many reads


def replay_cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``npu-emu replay PATH ARGS`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "npuemu.cli", "replay", str(path), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "XRT_PROGRESS": "0"},
        check=False,
    )


def request_index(rec_path: Path, record_index: int) -> int:
    """The request index ``npu-emu replay`` gives the record at `record_index`."""
    from npuemu.replay import REQUEST_KINDS

    rec = read_recording(rec_path)
    return sum(r.kind in REQUEST_KINDS for r in rec.records if r.index < record_index)


@pytest.fixture(scope="module")
def board_recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, bytes]]:
    """A board-like session's recording: plddr written (staged), copied, polled, read back."""
    path = tmp_path_factory.mktemp("board") / "board.npurec"
    data = random.Random(7).randbytes(COPY)
    with ServerProcess.start(devices=1) as srv:
        dev = open_device(RecordingTransport(GrpcTransport.from_url(srv.url), path))
        try:
            plddr = dev.get_mem_region("plddr")
            a, b = plddr.malloc(BIG), plddr.malloc(BIG)
            plddr.write(a.begin, data)
            plddr.memcpy(b.begin, a.begin, COPY)  # one DMA, waited for by interrupt
            # A driver that polls instead of waiting: start a long copy, poll STATUS.BUSY.
            regs = dev.get_reg_region("dma")
            regs.execute(
                dma.program_ops(regs.base, dma.DmaTransfer(a.begin.addr, b.begin.addr, BIG))
            )
            status = regs.poll(
                regs.regs.STATUS.address, DMA.register("STATUS").field("BUSY").mask, 0, timeout_s=60
            )
            regs.write(regs.regs.INT_STATUS.address, dma.DMA_EVENTS)
            out = bytearray(COPY)
            plddr.read(out, b.begin)
            head = bytearray(64)
            dev.udma.read(head, dev.dma_engine.bounce.begin)  # a small read kept whole
        finally:
            dev.close()
    assert out == data
    assert status & DMA.register("STATUS").field("BUSY").mask == 0
    yield path, data


def test_a_board_recording_holds_the_session_with_polls_as_one_record(
    board_recording: tuple[Path, bytes],
) -> None:
    path, data = board_recording
    rec = read_recording(path)
    assert rec.wall_clock and rec.header["origin"] == "client" and rec.header["model"] is None
    assert rec.end is not None and rec.end["reason"] == "the device was closed"
    requests = [r for r in rec.records if r.kind == Kind.REQUEST]
    assert all(r.body["t"] is None and r.body["c"] is None for r in requests)
    ws = [float(r.body["w"]) for r in rec.records if "w" in r.body]
    assert ws == sorted(ws)  # in the order they happened
    assert {r.body["op"] for r in requests} >= {"batch", "wait_irq", "write_reg"}
    writes = [r.body for r in rec.records if r.kind == Kind.MEMORY_WRITE]
    assert writes[0]["data"] == data  # the staged bytes, whole
    polls = [r.body for r in rec.records if r.kind == Kind.POLL]
    long_poll = max(polls, key=lambda b: b["reads"])
    assert long_poll["reads"] > 10 and long_poll["matched"] and long_poll["dur"] > 0
    # The loop of reads is that one record: no other record reads STATUS around it.
    status = DMA.register("STATUS").offset
    assert long_poll["addr"] % 0x1000 == status
    reads = [r for r in rec.records if r.body.get("op") == "read_reg"]
    assert len(reads) < 3


def test_a_board_recording_replays_bit_exact_on_the_simulator(
    board_recording: tuple[Path, bytes],
) -> None:
    path, _ = board_recording
    done = replay_cli(path, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no cycles recorded or compared" in done.stdout, done.stdout
    assert "bit-exact" in done.stdout and "poll read counts are not compared" in done.stdout
    listing = replay_cli(path, "--list")
    assert listing.returncode == 0, listing.stderr
    assert "poll dma.STATUS until & 0x1 == 0x0" in listing.stdout, listing.stdout
    assert "wall " in listing.stdout


@pytest.mark.parametrize("what", ["probe", "poll", "memory"])
def test_one_altered_response_diverges_at_that_request(
    board_recording: tuple[Path, bytes], what: str, tmp_path: Path
) -> None:
    path, _ = board_recording
    rec = read_recording(path)
    bodies = [dict(r.body) for r in rec.records]
    if what == "probe":  # the MAGIC the driver read first
        i = 0
        results = [list(x) for x in bodies[i]["reply"]["results"]]
        results[0][1] ^= 1
        bodies[i]["reply"] = {"results": results}
        expect = "op 0 of 3, read npu.MAGIC"
    elif what == "poll":
        i = max(
            (j for j, r in enumerate(rec.records) if r.kind == Kind.POLL),
            key=lambda j: bodies[j]["reads"],
        )
        bodies[i]["value"] ^= 1 << 8
        expect = "poll of dma.STATUS"
    else:
        i = next(
            j for j, r in enumerate(rec.records) if "data" in r.body and r.kind == Kind.MEMORY_READ
        )
        data = bytearray(bodies[i]["data"])
        data[5] ^= 0xFF
        bodies[i]["data"] = bytes(data)
        expect = "byte 5 of 64"
    altered = tmp_path / "altered.npurec"
    write_recording(altered, rec.header, bodies)
    done = replay_cli(altered, "--check")
    assert done.returncode == 4, done.stdout + done.stderr
    index = request_index(altered, rec.records[i].index)
    assert f"DIVERGED at request #{index} " in done.stdout, done.stdout
    assert expect in done.stdout, done.stdout


def test_waves_of_a_board_recording_are_refused_clearly(
    board_recording: tuple[Path, bytes], tmp_path: Path
) -> None:
    path, _ = board_recording
    done = replay_cli(path, "--waves", "0:100", "--out", str(tmp_path / "w.fst"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "board's recording" in done.stderr
