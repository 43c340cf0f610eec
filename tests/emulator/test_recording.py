"""Recordings (``npu-emu serve --record``) and their replay (``npu-emu replay``), with real
servers, real worker processes and ``npu-emu replay`` as a real subprocess.

A recorded lease replays bit-exact (register values, wait outcomes, the instant each request
started and its cycle count), also when its requests raced a busy engine; one altered
response is reported at exactly its request; another target or model is refused (or,
forced, diverges clearly); replays repeat exactly; the folder budget deletes the oldest
recordings; a truncated, a cut and a corrupt recording say so.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from rpc_client import (
    DMA_BASE,
    NPU_BASE,
    PLDDR_BASE,
    UDMA_BASE,
    Client,
    children_of,
    connect,
    dma_ops,
)

from npuemu.replay import REQUEST_KINDS, choose_model, replay
from npuemu.server.launch import ServerProcess
from npuemu.server.recording import (
    INLINE_READ_BYTES,
    Kind,
    RecordingFolder,
    RecordingWriter,
    lease_digest,
    read_recording,
    write_recording,
)
from xrt.hw.regs import DMA, NPU
from xrt.hw.wire import pb

pytestmark = pytest.mark.sim

DMA_STATUS = DMA_BASE + DMA.register("STATUS").offset
TARGET = NPU_BASE + NPU.register("TARGET").offset
COPY = 100_001  # bytes the DMA lease copies (its readback is stored as a digest)
SMALL = 64  # a readback small enough to be stored whole


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


def recording_of(folder: Path, lease_id: str) -> Path:
    """The recording of the lease `lease_id` (its name carries the lease's digest)."""
    found = list(folder.glob(f"*-{lease_digest(lease_id)[:8]}.npurec"))
    assert len(found) == 1, (lease_id, sorted(p.name for p in folder.iterdir()))
    return found[0]


def wait_until(cond, what: str, timeout_s: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def dma_lease(c: Client, seed: int = 1, close: bool = True) -> None:
    """Write memory, copy it to PL DDR (polled in the batch) and back (started, raced by
    status reads while the engine runs, then waited for), read it back."""
    c.open()
    c.read(TARGET)  # what a driver checks first: which NPU it talks to
    data = random.Random(seed).randbytes(COPY)
    c.write_mem(UDMA_BASE + 5, data)
    c.batch(
        *dma_ops(UDMA_BASE + 5, PLDDR_BASE + 3, len(data)),
        pb.RegisterOp(
            poll=pb.RegisterPoll(address=DMA_STATUS, mask=1, expected=0, max_cycles=1_000_000)
        ),
    )
    c.batch(*dma_ops(PLDDR_BASE + 3, UDMA_BASE + (8 << 20), len(data)))
    for _ in range(4):
        c.read(DMA_STATUS)  # when each lands depends on the client: the recording pins it
    w = c.wait(timeout_ms=60_000)
    assert w.outcome == pb.WAIT_OUTCOME_INTERRUPT
    assert c.read_mem(UDMA_BASE + (8 << 20), len(data)) == data
    assert c.read_mem(UDMA_BASE + (8 << 20), SMALL) == data[:SMALL]
    if close:
        c.close()


@pytest.fixture(scope="module")
def record_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recordings")


@pytest.fixture(scope="module")
def server(record_dir: Path) -> Iterator[ServerProcess]:
    with ServerProcess.start(devices=1, extra_args=("--record", str(record_dir))) as srv:
        yield srv


def test_a_recording_holds_the_lease_in_order(server: ServerProcess, record_dir: Path) -> None:
    c = connect(server)
    try:
        dma_lease(c, close=False)
        lease = c.lease
        c.close()
    finally:
        c.channel.close()
    rec = read_recording(recording_of(record_dir, lease))
    h = rec.header
    assert (h["target"], h["device"], h["version"]) == ("buyi", "npu0", 1)
    assert h["model"] == choose_model(rec, None)[1].digest
    assert h["lease"] == lease_digest(lease) and lease not in rec.path.read_bytes().hex()
    kinds = [(r.kind, r.body.get("op")) for r in rec.records]
    assert kinds == [
        (Kind.REQUEST, "read_reg"),
        (Kind.MEMORY_WRITE, None),
        (Kind.REQUEST, "batch"),
        (Kind.REQUEST, "batch"),
        *[(Kind.REQUEST, "read_reg")] * 4,
        (Kind.REQUEST, "wait_irq"),
        (Kind.MEMORY_READ, None),
        (Kind.MEMORY_READ, None),
        (Kind.END, None),
    ]
    first, *_, last = [r.body for r in rec.records if r.kind == Kind.REQUEST]
    assert first["t"] == 0 and last["c"] > 0
    big, small = (r.body for r in rec.records if r.kind == Kind.MEMORY_READ)
    assert "sha256" in big and big["n"] == COPY > INLINE_READ_BYTES
    assert len(small["data"]) == SMALL
    assert rec.end is not None and rec.end["reason"] == "closed by its holder"


@pytest.fixture(scope="module")
def dma_recording_path(server: ServerProcess, record_dir: Path) -> Path:
    c = connect(server)
    try:
        dma_lease(c, seed=2, close=False)
        lease = c.lease
        c.close()
    finally:
        c.channel.close()
    return recording_of(record_dir, lease)


def test_replay_check_is_bit_exact(dma_recording_path: Path) -> None:
    done = replay_cli(dma_recording_path, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bit-exact: 11 request(s) compared" in done.stdout, done.stdout
    assert "11 of 11 request(s)" in done.stdout


def test_replay_without_check_prints_a_summary(dma_recording_path: Path) -> None:
    done = replay_cli(dma_recording_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(
        r"simulated cycles [\d,]+ \(recorded [\d,]+\); responses sha256 [0-9a-f]{16}; "
        r"replay [\d.]+ s wall",
        done.stdout,
    )
    assert "bit-exact" not in done.stdout


def _altered(path: Path, out: Path, pick, change) -> int:  # type: ignore[no-untyped-def]
    """Write `path` to `out` with one record's body changed; its request index."""
    rec = read_recording(path)
    requests = [r for r in rec.records if r.kind in REQUEST_KINDS]
    target_rec = next(r for r in requests if pick(r))
    change(target_rec.body)
    write_recording(out, rec.header, [r.body for r in rec.records])
    return requests.index(target_rec)


def test_one_altered_register_value_diverges_at_that_request(
    dma_recording_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "altered.npurec"

    def flip(body: dict) -> None:
        body["reply"]["value"] ^= 0x4

    def busy_read(r) -> bool:  # type: ignore[no-untyped-def]
        return r.body.get("op") == "read_reg" and r.body["args"]["addr"] == DMA_STATUS

    index = _altered(dma_recording_path, out, busy_read, flip)
    done = replay_cli(out, "--check")
    assert done.returncode == 4, done.stdout + done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("DIVERGED"))
    assert f"request #{index} (read_reg;" in line, line
    assert "read dma.STATUS @ 0x" in line and "expected OK 0x" in line and ", actual OK 0x" in line


def test_one_altered_memory_byte_diverges_at_that_request(
    dma_recording_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "altered.npurec"

    def flip(body: dict) -> None:
        data = bytearray(body["data"])
        data[3] ^= 0xFF
        body["data"] = bytes(data)

    index = _altered(
        dma_recording_path, out, lambda r: r.kind == Kind.MEMORY_READ and "data" in r.body, flip
    )
    done = replay_cli(out, "--check")
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"DIVERGED at request #{index} (memory_read;" in done.stdout, done.stdout
    assert f"byte 3 of {SMALL} read at" in done.stdout


def test_replay_json_gives_the_summary_the_divergence_and_errors(
    dma_recording_path: Path, tmp_path: Path
) -> None:
    done = replay_cli(dma_recording_path, "--check", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["bit_exact"] is True and doc["requests"] == doc["total"] == 11
    assert doc["cycles"] == doc["recorded_cycles"] > 0 and len(doc["responses_sha256"]) == 64
    out = tmp_path / "altered.npurec"

    def flip(body: dict) -> None:
        body["reply"]["value"] ^= 0x4

    def busy_read(r) -> bool:  # type: ignore[no-untyped-def]
        return r.body.get("op") == "read_reg" and r.body["args"]["addr"] == DMA_STATUS

    index = _altered(dma_recording_path, out, busy_read, flip)
    done = replay_cli(out, "--check", "--json")
    assert done.returncode == 4
    doc = json.loads(done.stdout)
    assert doc["bit_exact"] is False and doc["divergence"]["request"] == index
    assert doc["divergence"]["op"] == "read_reg"
    missing = replay_cli(tmp_path / "nope.npurec", "--json")
    assert missing.returncode == 2 and missing.stderr == ""
    error = json.loads(missing.stdout)["error"]
    assert error["code"] == "bad_input" and "nope.npurec" in error["message"]
    listing = json.loads(replay_cli(dma_recording_path, "--list", "--json").stdout)
    assert len(listing["requests"]) == 11


def test_another_model_is_refused_unless_a_target_is_given(
    dma_recording_path: Path, tmp_path: Path
) -> None:
    rec = read_recording(dma_recording_path)
    other = tmp_path / "other-model.npurec"
    write_recording(
        other, {**rec.header, "model": "0123456789abcdef"}, [r.body for r in rec.records]
    )
    done = replay_cli(other, "--check")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "recorded with the buyi model 0123456789abcdef" in done.stderr
    assert "pass --target buyi" in done.stderr
    forced = replay_cli(other, "--check", "--target", "buyi")
    assert forced.returncode == 0 and "bit-exact" in forced.stdout, forced.stdout + forced.stderr


def test_the_other_target_diverges_clearly(dma_recording_path: Path) -> None:
    done = replay_cli(dma_recording_path, "--check", "--target", "zg330")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "replaying a buyi recording on zg330" in done.stderr
    assert re.search(
        r"^DIVERGED at request #0 \(read_reg; record 1 at byte offset \d+\): read npu.TARGET "
        r"@ 0x40000\w+: expected OK 0x\w+, actual OK 0x\w+$",
        done.stdout,
        re.M,
    ), done.stdout


def test_five_replays_give_identical_results(dma_recording_path: Path) -> None:
    rec = read_recording(dma_recording_path)
    cfg, model = choose_model(rec, None)
    reports = [asyncio.run(replay(rec, cfg, model, check=True)) for _ in range(5)]
    assert all(r.divergence is None and r.requests == 11 for r in reports)
    assert len({(r.cycles, r.responses) for r in reports}) == 1
    assert reports[0].cycles == reports[0].recorded_cycles > 0


def test_a_local_clients_register_ring_is_recorded_and_replays_bit_exact(
    server: ServerProcess, record_dir: Path
) -> None:
    """A local holder gets its register ring on a recording server (the ring's requests
    reach the model through the worker's port, where the taps see them) but not the mapped
    memory (its accesses would bypass the server); its lease, register accesses, DMA
    through plddr and interrupt waits all over the ring, replays bit-exact."""
    from xrt import Device

    data = random.Random(5).randbytes(20_000)
    with Device.open(server.url) as dev:
        t = dev.transport
        assert not t.local_fast_path and "--record" in t.local_note, t.local_note
        assert t.ring is not None, t.ring_note
        scratch = NPU_BASE + NPU.register("SCRATCH").offset
        dev.write_reg(scratch, 0x1234, region="npu")
        assert dev.read_reg(scratch, region="npu") == 0x1234
        plddr = dev.get_mem_region("plddr")  # the DMA moves it: registers and waits on the ring
        plddr.write(plddr.base + 0x100, data)
        back = bytearray(len(data))
        plddr.read(back, plddr.base + 0x100)
        assert bytes(back) == data
        assert t.ring is not None, "the ring was dropped during the lease"
        lease = t.lease_id
    path = recording_of(record_dir, lease)
    rec = read_recording(path)
    requests = [r for r in rec.records if r.kind == Kind.REQUEST]
    assert sum(r.body["op"] == "wait_irq" for r in requests) >= 2  # the DMA's waits
    assert [r.kind for r in rec.records].count(Kind.MEMORY_WRITE) >= 1
    done = replay_cli(path, "--check")
    assert done.returncode == 0 and "bit-exact" in done.stdout, done.stdout + done.stderr


def test_a_corrupt_recording_names_the_record_and_offset(
    dma_recording_path: Path, tmp_path: Path
) -> None:
    rec = read_recording(dma_recording_path)
    victim = rec.records[3]
    data = bytearray(dma_recording_path.read_bytes())
    data[victim.offset + 12] ^= 0x5A
    bad = tmp_path / "corrupt.npurec"
    bad.write_bytes(bytes(data))
    done = replay_cli(bad, "--check")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"record {victim.index} at byte offset {victim.offset} is corrupt" in done.stderr
    bodies = [r.body for r in rec.records]
    del bodies[victim.index - 1]["op"]  # well framed (its CRC is right), but no request
    write_recording(tmp_path / "malformed.npurec", rec.header, bodies)
    done = replay_cli(tmp_path / "malformed.npurec", "--check")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"record {victim.index} at byte offset {victim.offset} is malformed" in done.stderr
    (tmp_path / "junk.npurec").write_bytes(b"hello world")
    done = replay_cli(tmp_path / "junk.npurec")
    assert done.returncode == 2 and "not an npu-emu recording" in done.stderr


def test_a_recording_cut_mid_record_replays_what_it_holds(
    dma_recording_path: Path, tmp_path: Path
) -> None:
    rec = read_recording(dma_recording_path)
    cut_at = rec.records[5].offset + 7  # inside record 6's frame: records before it stay
    cut = tmp_path / "cut.npurec"
    cut.write_bytes(dma_recording_path.read_bytes()[:cut_at])
    done = replay_cli(cut, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no end record" in done.stdout and f"byte offset {rec.records[5].offset}" in done.stdout
    assert "bit-exact: 5 request(s) compared (up to where the recording stops)" in done.stdout


def test_a_crashed_server_leaves_a_readable_recording(tmp_path: Path) -> None:
    folder = tmp_path / "recs"
    srv = ServerProcess.start(devices=1, extra_args=("--record", str(folder)))
    try:
        workers = children_of(srv.proc.pid, "npu_sim")
        c = connect(srv)
        dma_lease(c, seed=3, close=False)
        lease = c.lease
        c.channel.close()
        srv.proc.kill()  # SIGKILL: no end record, no clean shutdown
        srv.proc.wait(30)
        wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in workers), "workers gone")
    finally:
        srv.stop()
    path = recording_of(folder, lease)
    rec = read_recording(path)
    assert rec.end is None and not rec.cut and len(rec.records) == 11
    done = replay_cli(path, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no end record" in done.stdout and "bit-exact: 11 request(s)" in done.stdout


def test_truncated_recordings_replay_to_the_cut_and_the_budget_deletes_the_oldest(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "recs"
    args = ("--record", str(folder), "--record-max-mib", "1", "--record-keep-mib", "2")
    with ServerProcess.start(devices=1, extra_args=args) as srv:
        c = connect(srv)
        try:
            dma_lease(c, close=False)  # about 0.2 MiB
            first = recording_of(folder, c.lease)
            c.close()
            c.open()  # past 1 MiB: cut
            c.write_mem(UDMA_BASE, random.Random(5).randbytes(300_000))
            c.batch(*dma_ops(UDMA_BASE, PLDDR_BASE, 300_000))
            assert c.wait(timeout_ms=60_000).outcome == pb.WAIT_OUTCOME_INTERRUPT
            c.write_mem(UDMA_BASE, random.Random(6).randbytes(900_000))  # does not fit
            c.read(DMA_STATUS)
            cut = recording_of(folder, c.lease)
            c.close()
            rec = read_recording(cut)
            assert rec.truncated is not None and rec.end is not None and rec.end["dropped"] == 2
            assert cut.stat().st_size <= 1 << 20
            # About 0.1 + 0.3 MiB so far; two leases of 0.82 MiB take the folder past its
            # 2 MiB, and deleting the oldest (0.1 MiB) brings it back under.
            for seed in (7, 8):
                c.open()
                c.write_mem(UDMA_BASE, random.Random(seed).randbytes(860_000))
                c.close()
            wait_until(lambda: "over its budget" in srv.log, "the budget warning")
        finally:
            c.channel.close()
        assert not first.exists() and cut.exists()
        assert f"deleted the oldest finished recording(s): {first.name}" in srv.log
    total = sum(p.stat().st_size for p in folder.glob("*.npurec"))
    assert total <= 2 << 20
    done = replay_cli(cut, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "truncated at its cap of 1 MiB after 3 request(s)" in done.stdout
    assert "bit-exact: 3 request(s) compared (up to where the recording stops)" in done.stdout


def test_the_writer_caps_and_the_folder_keeps_its_budget(tmp_path: Path) -> None:
    """The policy alone: the cap cuts with a truncated record and still ends the file; the
    budget deletes the oldest finished recordings and never one still being written."""
    w = RecordingWriter(tmp_path / "a.npurec", {"format": "x"}, max_bytes=8192)
    for _ in range(3):
        w.memory_write(UDMA_BASE, b"\1" * 2000)
    w.finish("done")
    with pytest.raises(Exception, match="first record is not a recording header"):
        read_recording(tmp_path / "a.npurec")
    folder = RecordingFolder(tmp_path / "f", max_bytes=1 << 20, keep_bytes=3000)
    old = []
    for i in range(3):
        p = folder.folder / f"2026010{i}-npu0-x.npurec"
        p.write_bytes(b"\0" * 1000)
        os.utime(p, (1_000_000 + i, 1_000_000 + i))
        old.append(p)
    busy = folder.folder / "20260109-npu0-busy.npurec"
    busy.write_bytes(b"\0" * 1500)
    os.utime(busy, (999_999, 999_999))  # the oldest, but still being written
    folder.writing[busy] = None  # type: ignore[assignment]
    assert folder.enforce_budget() == old[:2]
    assert busy.exists() and old[2].exists()


@pytest.mark.parametrize("target", ["buyi", "zg330"])
def test_a_network_on_the_npu_replays_bit_exact(target: str, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "network"))
    from netutil import random_feeds
    from onnx_zoo import COMPOSITES

    from xrt import Device
    from xrt.backend import BuyiBackend, HostBackend, ZG330Backend
    from xrt.network import Network
    from xrt.quant import quantize_network
    from xrt.session import Session

    model = COMPOSITES["residual"]()
    net = Network.from_onnx(model)
    qnet = quantize_network(net, [random_feeds(model, seed=s) for s in range(2)])
    feeds = random_feeds(model, seed=42)
    with Session.create([HostBackend], qnet).apply() as host:
        want = [t.numpy() for t in host.forward(feeds)]
    backend = BuyiBackend if target == "buyi" else ZG330Backend
    folder = tmp_path / "recs"
    with ServerProcess.start(target=target, devices=1, extra_args=("--record", str(folder))) as srv:
        dev = Device.open(srv.url)
        lease = dev.transport.lease_id
        with Session.create([backend, HostBackend], qnet, [dev, None]).apply() as sess:
            assert any(b.is_type(backend) for b in sess.backend_bindings().values())
            got = [t.numpy() for t in sess.forward(feeds)]
            dev.checkpoint(tmp_path / "mid.npuckpt")  # the recording keeps it
            again = [t.numpy() for t in sess.forward(feeds)]
        dev.close()
    for g, a, w in zip(got, again, want, strict=True):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(a, w)
    path = recording_of(folder, lease)
    rec = read_recording(path)
    waits = [r for r in rec.records if r.body.get("op") == "wait_irq"]
    assert waits, "the NPU was never launched"
    (saved,) = [r for r in rec.records if r.kind == Kind.CHECKPOINT_SAVE]
    done = replay_cli(path, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bit-exact" in done.stdout, done.stdout
    # A window after the checkpoint: the replay starts from it, not from the lease's start.
    last_wait = waits[-1].body
    start = int(last_wait["c"]) - 2_000  # the second forward's last launch
    out = tmp_path / "late.fst"
    done = replay_cli(path, "--waves", f"{start}:{start + 1_000}", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"started from the checkpoint of record {saved.index}" in done.stdout, done.stdout
    assert "waveform window: cycles" in done.stdout, done.stdout
    assert out.stat().st_size > 1_000


def test_an_observers_reads_are_recorded_and_replayed(tmp_path: Path) -> None:
    """An observer's read takes bus cycles of the holder's time: it is recorded, in order,
    and the replay runs it too (still bit-exact)."""
    from xrt.hw.wire import ADMIN_KEY

    admin = "adm1n-t0ken-for-recording-tests"
    token_file = tmp_path / "admin"
    token_file.write_text(admin + "\n")
    token_file.chmod(0o600)
    folder = tmp_path / "recs"
    args = ("--record", str(folder), "--admin-token-file", str(token_file))
    with ServerProcess.start(devices=1, extra_args=args) as srv:
        c = connect(srv)
        try:
            c.open()
            c.batch(*dma_ops(UDMA_BASE, PLDDR_BASE, 200_000))  # a copy the observer watches
            for _ in range(3):
                c.stub.ObserveReadRegister(
                    pb.ObserveReadRegisterRequest(device="npu0", address=DMA_STATUS),
                    metadata=((ADMIN_KEY, admin),),
                )
            assert c.wait(timeout_ms=60_000).outcome == pb.WAIT_OUTCOME_INTERRUPT
            lease = c.lease
            c.close()
        finally:
            c.channel.close()
    path = recording_of(folder, lease)
    rec = read_recording(path)
    observed = [r.body for r in rec.records if r.body.get("observer")]
    assert [b["op"] for b in observed] == ["read_reg"] * 3
    done = replay_cli(path, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bit-exact: 5 request(s) compared" in done.stdout, done.stdout
