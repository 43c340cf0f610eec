"""Nothing a tenant does reaches the next holder, and no checkpoint file turns a server
against its users (docs/emulator.md, "Checkpoints" and "Lease ends"). On both targets,
against real servers with default options:

- a lease moves random data through every memory, the DMA engine and every engine buffer;
  the next holder's checkpoint (model state, memories) holds none of it, and its model
  state is byte for byte the one a holder of a new device gets;
- 32 crafted model states (every 16th byte rewritten, the file rebuilt by the format's own
  code) are refused whole (11011) and confined when restored portably; the worker never
  dies and the next holder's DMA is right; on a server that trusts files, the worker's own
  check refuses states that are not of its layout before Verilator reads them;
- decompression bombs and oversized sections are refused before anything is inflated, and
  the server stays under 600 MiB;
- a checkpoint carried to another server restores its memories and configuration
  registers (portable), never its model state;
- ``serve --warm`` with a file it cannot trust stops with one line, not a traceback.
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from rpc_client import connect

from npuemu.server.checkpoint import MAGIC, PAGE, Checkpoint
from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.backend.npu._driver import EngineDriver
from xrt.errors import XrtError
from xrt.hw import isa
from xrt.hw.regs import DMA as DMA_REGS
from xrt.hw.regs import NPU as NPU_REGS
from xrt.hw.targets import NPU, target
from xrt.hw.wire import pb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rtl"))
from isolation_programs import secret_program

pytestmark = pytest.mark.sim

SCRATCH = NPU_REGS.offset("SCRATCH")
DMA_SCRATCH = DMA_REGS.offset("SCRATCH")
SRC_LO = DMA_REGS.offset("SRC_LO")
PROG, DATA = 0x20_0000, 0x30_0000  # offsets in plddr of the engine program and its data
RSS_LIMIT = 600 << 20


@pytest.fixture(scope="module", params=["buyi", "zg330"])
def tname(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def server(tname: str) -> Iterator[ServerProcess]:
    """One device, default options (a checkpoint key of the server's own)."""
    with ServerProcess.start(target=tname, devices=1) as srv:
        yield srv


def _url(srv: ServerProcess) -> str:
    return f"{srv.url}/npu0"


def _restarts(srv: ServerProcess) -> int:
    c = connect(srv)
    try:
        return c.stub.GetCounters(pb.GetCountersRequest(device="npu0")).worker_restarts
    finally:
        c.channel.close()


def _peak_rss(srv: ServerProcess) -> int:
    for line in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) << 10
    raise AssertionError("no VmHWM")


def _words(data: bytes) -> np.ndarray:
    """The 8-byte words of `data` at every 8-byte boundary: what to look for."""
    return np.unique(np.frombuffer(data[: len(data) // 8 * 8], np.uint64))


def _found(blob: bytes, words: np.ndarray) -> int:
    """How many 8-byte windows of `blob`, at any byte offset, are among `words`."""
    if len(blob) < 8:
        return 0
    view = np.lib.stride_tricks.sliding_window_view(np.frombuffer(blob, np.uint8), 8)
    return int(np.isin(np.ascontiguousarray(view).view(np.uint64).ravel(), words).sum())


def _dma_is_right(url: str, seed: int) -> None:
    """A holder's DMA moves its bytes (plddr: staged in udma, both ways by the engine)."""
    data = np.random.default_rng(seed).integers(0, 256, 1 << 16, dtype=np.uint8).tobytes()
    with Device.open(url) as dev:
        plddr = dev.get_mem_region("plddr")
        plddr.write(plddr.base + 0x8000, data)
        back = bytearray(len(data))
        plddr.read(back, plddr.base + 0x8000)
    assert bytes(back) == data, "the next holder's DMA moved other bytes"


def _secret_lease(url: str, tname: str) -> bytes:
    """A lease that moves random data through every memory, the DMA engine (both ways),
    the ZG330 OCM and every engine buffer, and leaves random register values; returns
    all the random bytes it used."""
    rng = np.random.default_rng(38)
    moved = rng.integers(0, 256, 64 << 10, dtype=np.uint8).tobytes()
    prog, engine_data = secret_program(NPU)
    regs = rng.integers(1, 1 << 32, 2, dtype=np.uint64)
    with Device.open(url) as b:
        memories = ["plddr", *(["ocm"] if tname == "zg330" else [])]
        for name in memories:  # DMA in and out (udma stages it)
            region = b.get_mem_region(name)
            region.write(region.base + 0x1000, moved)
            back = bytearray(len(moved))
            region.read(back, region.base + 0x1000)
            assert bytes(back) == moved
        plddr = b.get_mem_region("plddr")
        plddr.write(plddr.base + PROG, isa.encode_program(prog))
        plddr.write(plddr.base + DATA, engine_data)
        EngineDriver(b).launch(  # type: ignore[arg-type]
            plddr.base + PROG, len(prog), {0: plddr.base + DATA}, what="secret", timeout_s=120
        )
        b.get_reg_region("npu").write(SCRATCH, int(regs[0]), relative=True)
        b.get_reg_region("dma").write(DMA_SCRATCH, int(regs[1]), relative=True)
    return moved + engine_data + regs.astype("<u4").tobytes()


def test_the_next_holder_gets_a_pristine_device(
    server: ServerProcess, tname: str, tmp_path: Path
) -> None:
    url = _url(server)
    before, after = tmp_path / "before.npuckpt", tmp_path / "after.npuckpt"
    with Device.open(url) as a:
        a.checkpoint(before)
    secrets = _secret_lease(url, tname)
    with Device.open(url) as a:
        a.checkpoint(after)
    ckpt = Checkpoint.parse(after.read_bytes())
    words = _words(secrets)
    leaked = {"model state": _found(ckpt.model_state, words)}
    for m in ckpt.memories:
        leaked[m.name] = sum(_found(bytes(block), words) for _, block in m.blocks())
    print(f"{tname}: words of the previous holder found: {leaked}")
    assert not any(leaked.values()), leaked
    assert ckpt.same_state(Checkpoint.parse(before.read_bytes())) is None, (
        "the next holder's device is not the one the holder before got"
    )
    assert _restarts(server) == 0


def _crafted(good: Checkpoint, variant: int) -> bytes:
    """`good` with every 16th byte of its model state rewritten (from `variant % 16` on,
    random values), the file rebuilt by the format's own code: no seal (no key)."""
    state = bytearray(good.model_state)
    rng = np.random.default_rng(variant)
    positions = range(variant % 16, len(state), 16)
    state[variant % 16 :: 16] = rng.integers(0, 256, len(positions), dtype=np.uint8).tobytes()
    good.model_state = bytes(state)
    return good.to_bytes()


def test_crafted_model_states_are_refused_or_confined(
    server: ServerProcess, tname: str, tmp_path: Path
) -> None:
    url = _url(server)
    path, bad = tmp_path / "good.npuckpt", tmp_path / "bad.npuckpt"
    with Device.open(url) as dev:
        dev.get_reg_region("npu").write(SCRATCH, 0x5EC2E7, relative=True)
        dev.checkpoint(path)
    raw = path.read_bytes()
    with Device.open(url) as dev:
        for variant in range(32):
            bad.write_bytes(_crafted(Checkpoint.parse(raw), variant))
            with pytest.raises(XrtError) as info:
                dev.restore(bad)
            assert info.value.code == 11011 and "is not sealed" in str(info.value)
            dev.restore(bad, portable=True)  # memories and registers: the model is pristine
            assert dev.get_reg_region("npu").read(SCRATCH, relative=True) == 0x5EC2E7
        # The server's seal copied onto a changed file does not pass either.
        forged = bytearray(_crafted(Checkpoint.parse(raw), 99))
        head_at = len(MAGIC) + 4
        (hlen,) = struct.unpack_from("<I", forged, len(MAGIC))
        head = json.loads(forged[head_at : head_at + hlen])
        head["seal_key"] = Checkpoint.parse(raw).seal_key_id
        new_head = json.dumps(head, sort_keys=True).encode()
        body = MAGIC + struct.pack("<I", len(new_head)) + new_head + forged[head_at + hlen : -64]
        bad.write_bytes(body + hashlib.sha256(body).digest() + raw[-32:])
        with pytest.raises(XrtError, match="does not match"):
            dev.restore(bad)
    assert _restarts(server) == 0
    _dma_is_right(url, 1)


def test_a_server_that_trusts_files_checks_their_layout(tname: str, tmp_path: Path) -> None:
    """--allow-foreign-checkpoints restores any model state of this model's layout; what
    is not of it (a module's check value, a context string's length, the size) is refused
    by the worker before Verilator reads it: no worker dies, the next holder's DMA works."""
    with ServerProcess.start(
        target=tname, devices=1, extra_args=("--allow-foreign-checkpoints",)
    ) as srv:
        url = _url(srv)
        path, bad = tmp_path / "good.npuckpt", tmp_path / "bad.npuckpt"
        with Device.open(url) as dev:
            dev.checkpoint(path)
        good = Checkpoint.parse(path.read_bytes())
        state = good.model_state
        check_at = 16 + 1  # header, then one flag: the first module's check value
        broken = {
            "check value": state[:check_at] + bytes(8) + state[check_at + 8 :],
            "cut": state[: len(state) // 2],
            "padded": state + bytes(4096),
            "no trailer": state[:-8] + b"12345678",
        }
        block = _context_block(state)
        huge = state[:block] + struct.pack("<I", 0xFFFF_FFF0) + state[block + 4 :]
        broken["string length"] = huge
        with Device.open(url) as dev:
            for name, variant in broken.items():
                good.model_state = variant
                bad.write_bytes(good.to_bytes())
                with pytest.raises(XrtError) as info:
                    dev.restore(bad)
                assert info.value.code == 11011, (name, str(info.value))
                assert "not this model's" in str(info.value), (name, str(info.value))
        assert _restarts(srv) == 0
        _dma_is_right(url, 2)


def _context_block(state: bytes) -> int:
    """Where the first context string's length sits: after the first context block (a
    canonical save writes a marker there, rtl/sim/npu_model_state.h)."""
    marker = b"npu-emu context block   "
    at = state.index(marker)
    end = at
    while state[end : end + len(marker)] == marker:
        end += len(marker)
    # The block's size is no multiple of the marker: the rest is a prefix of it.
    while end < len(state) and state[end] == marker[(end - at) % len(marker)]:
        end += 1
    return end


# ---------------------------------------------------------------------- bombs
def _file(head: dict, body: bytes) -> bytes:
    """A checkpoint file around `head` and `body`, with a valid checksum and no seal."""
    raw = json.dumps(head).encode()
    data = MAGIC + struct.pack("<I", len(raw)) + raw + body
    return data + hashlib.sha256(data).digest() + bytes(32)


def _bomb_files(good: Checkpoint, tname: str) -> dict[str, tuple[bytes, str]]:
    """(file, what the refusal names) per bomb. The model section is the good one."""
    model = good.model_state
    base = {
        "format": 2,
        "target": tname,
        "hw_version": good.hw_version,
        "model": good.model_digest,
        "cycle": 0,
    }
    model_sec = {"name": "model", "codec": "raw", "stored": len(model), "size": len(model)}
    gib_zeros = zlib.compress(bytes(64 << 20), 9) * 16  # 16 streams: only the first counts
    plddr = target(tname).memory("plddr").size
    one_gib = {
        "name": "mem:plddr",
        "codec": "zlib",
        "stored": len(gib_zeros),
        "size": (1 << 30) + 4 * (1 << 18),
        "memory_size": 1 << 30,
        "pages": 1 << 18,
    }
    liar = zlib.compress(bytes(256 << 20), 9)  # says 4 KiB, inflates to 256 MiB
    small_lie = {"name": "mem:udma", "codec": "zlib", "stored": len(liar), "size": 4 + PAGE,
                 "memory_size": target(tname).memory("udma").size, "pages": 1}  # fmt: skip
    big_model = zlib.compress(bytes(64 << 20), 9)
    nested = b"[" * 20_000 + b"]" * 20_000  # 40 KB: within the header's size
    nested_file = MAGIC + struct.pack("<I", len(nested)) + nested
    return {
        "1 GiB memory": (
            _file({**base, "sections": [model_sec, one_gib]}, model + gib_zeros),
            "memory_size",
        ),
        "inflates past its size": (
            _file({**base, "sections": [model_sec, small_lie]}, model + liar),
            "inflates past",
        ),
        "64 MiB model": (
            _file(
                {
                    **base,
                    "sections": [
                        {
                            "name": "model",
                            "codec": "zlib",
                            "stored": len(big_model),
                            "size": 64 << 20,
                        }
                    ],
                },
                big_model,
            ),
            "model's state is at most",
        ),
        "nested header": (
            nested_file + hashlib.sha256(nested_file).digest() + bytes(32),
            "nested too deeply",
        ),
        "all of plddr, zero pages": (_zero_plddr(base, model_sec, model, plddr), ""),
    }


def _zero_plddr(base: dict, model_sec: dict, model: bytes, size: int) -> bytes:
    """Every page of plddr, all zero, in one zlib stream of about half a MiB: within every
    limit (a restore of it is allowed), 512 MiB once inflated."""
    pages = size // PAGE
    z = zlib.compressobj(9)
    stream = z.compress(np.arange(pages, dtype="<u4").tobytes())
    zero = bytes(16 << 20)
    for _ in range(size // len(zero)):
        stream += z.compress(zero)
    stream += z.flush()
    sec = {"name": "mem:plddr", "codec": "zlib", "stored": len(stream),
           "size": pages * (4 + PAGE), "memory_size": size, "pages": pages}  # fmt: skip
    return _file({**base, "sections": [model_sec, sec]}, model + stream)


def test_bombs_are_refused_before_they_inflate(
    server: ServerProcess, tname: str, tmp_path: Path
) -> None:
    url = _url(server)
    good_path = tmp_path / "good.npuckpt"
    with Device.open(url) as dev:
        dev.checkpoint(good_path)
    good = Checkpoint.parse(good_path.read_bytes())
    path = tmp_path / "bomb.npuckpt"
    with Device.open(url) as dev:
        for name, (data, reason) in _bomb_files(good, tname).items():
            path.write_bytes(data)
            print(f"{name}: {len(data)} bytes")
            if not reason:  # within the limits: restored, a step at a time
                dev.restore(path, portable=True)
                continue
            with pytest.raises(XrtError) as info:
                dev.restore(path, portable=True)
            assert info.value.code == 11011 and reason in str(info.value), (name, info.value)
    peak = _peak_rss(server)
    print(f"{tname}: the server's peak resident memory {peak >> 20} MiB")
    assert peak < RSS_LIMIT
    assert _restarts(server) == 0
    _dma_is_right(url, 3)
    # `npu-emu checkpoint info` (no server) refuses it in one line too.
    path.write_bytes(_bomb_files(good, tname)["1 GiB memory"][0])
    info = subprocess.run(
        [sys.executable, "-m", "npuemu", "checkpoint", "info", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert info.returncode != 0 and "memory_size" in info.stderr
    assert "Traceback" not in info.stderr and len(info.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------- carried files
def test_a_carried_checkpoint_restores_portably(
    server: ServerProcess, tname: str, tmp_path: Path
) -> None:
    """Taken on one server (its own key), restored on another: the whole state is refused
    naming the other key; the portable scope puts back memories and registers."""
    path = tmp_path / "carried.npuckpt"
    data = np.random.default_rng(4).integers(0, 256, 1 << 15, dtype=np.uint8).tobytes()
    dma_src = target(tname).memory("plddr").base + 0x4000
    with ServerProcess.start(target=tname, devices=1) as other, Device.open(_url(other)) as dev:
        for name in ("udma", "plddr"):
            region = dev.get_mem_region(name)
            region.write(region.base + 0x3000, data)
        dev.get_reg_region("npu").write(SCRATCH, 0xC0FFEE, relative=True)
        dev.get_reg_region("dma").write(SRC_LO, dma_src & 0xFFFF_FFFF, relative=True)
        dev.checkpoint(path)
    with Device.open(_url(server)) as dev:
        with pytest.raises(XrtError) as info:
            dev.restore(path)
        assert info.value.code == 11011 and "another server's key" in str(info.value)
        dev.restore(path, portable=True)
        # The registers first: reading plddr programs the DMA again.
        assert dev.get_reg_region("npu").read(SCRATCH, relative=True) == 0xC0FFEE
        assert dev.get_reg_region("dma").read(SRC_LO, relative=True) == dma_src & 0xFFFF_FFFF
        for name in ("udma", "plddr"):
            region = dev.get_mem_region(name)
            back = bytearray(len(data))
            region.read(back, region.base + 0x3000)
            assert bytes(back) == data, name


def test_warm_with_a_file_it_cannot_trust_stops_in_one_line(
    server: ServerProcess, tname: str, tmp_path: Path
) -> None:
    path = tmp_path / "w.npuckpt"
    with Device.open(_url(server)) as dev:
        dev.checkpoint(path)
    cut = Checkpoint.parse(path.read_bytes())
    cut.model_state = cut.model_state[: len(cut.model_state) // 3]
    cut_path = tmp_path / "cut.npuckpt"
    cut_path.write_bytes(cut.to_bytes())
    cases = [
        ((), path, "sealed by another server's key"),  # a server of its own key
        (("--allow-foreign-checkpoints",), cut_path, "refused its model state"),
    ]
    for extra, warm, expected in cases:
        run = subprocess.run(
            [sys.executable, "-m", "npuemu", "serve", "--port", "0", "--target", tname,
             "--warm", str(warm), *extra],
            capture_output=True,
            text=True,
            timeout=600,
        )  # fmt: skip
        out = run.stdout + run.stderr
        assert run.returncode == 2, out
        assert expected in out and "Traceback" not in out, out


def test_grpc_checkpoint_limits_hold_before_receiving(server: ServerProcess) -> None:
    """A RestoreCheckpoint stream that declares more than a checkpoint can hold is
    refused at its first message (nothing is staged)."""
    c = connect(server)
    try:
        c.open("npu0")
        msg = pb.RestoreCheckpointRequest(lease_id=c.lease, total_bytes=1 << 40, data=b"x")
        with pytest.raises(grpc.RpcError) as info:
            c.stub.RestoreCheckpoint(iter([msg]))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "at most" in (info.value.details() or "")
    finally:
        c.close()
        c.channel.close()
