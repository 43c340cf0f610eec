"""Device checkpoints with a real server and its simulator processes, on both targets:
the whole state round-trips (registers, udma, plddr, the ZG330 OCM, the engines' cycle
counter), into the same device or another; corrupt, truncated and foreign files are refused
with nothing changed; a busy engine is refused or waited for; nothing crosses a lease; and
``serve --warm`` starts every lease from a checkpoint. The servers here share one
checkpoint key (--checkpoint-key-file), as the servers of a farm do; what a server without
it refuses: tests/emulator/test_checkpoint_trust.py."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from npuemu.server.checkpoint import MAGIC, Checkpoint, CheckpointError, MemoryImage
from npuemu.server.checkpoint_seal import SealKey
from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.errors import XrtError
from xrt.hw import dma
from xrt.hw.targets import target

pytestmark = pytest.mark.sim

SCRATCH = 0x40  # npu.SCRATCH's offset


@pytest.fixture(scope="module", params=["buyi", "zg330"])
def tname(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkpoint key these tests' servers share (a farm's --checkpoint-key-file)."""
    path = tmp_path_factory.mktemp("key") / "npu-emu.key"
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def server(tname: str, key_file: Path) -> Iterator[ServerProcess]:
    keyed = ("--checkpoint-key-file", str(key_file))
    with ServerProcess.start(target=tname, devices=2, extra_args=keyed) as srv:
        yield srv


def _open(srv: ServerProcess, device: str) -> Device:
    return Device.open(f"{srv.url}/{device}")


def _read(dev: Device, memory: str, addr: int, n: int) -> bytes:
    out = bytearray(n)
    dev.get_mem_region(memory).read(out, addr, n)
    return bytes(out)


def _fill(dev: Device, rng: np.random.Generator) -> dict[str, bytes]:
    """Random contents in every memory at random places, and a random SCRATCH."""
    cfg = target(dev.target)
    contents = {}
    for mem in cfg.memories:
        size = min(mem.size, 1 << 20)
        offset = int(rng.integers(0, (mem.size - size) // 4096 + 1)) * 4096
        data = rng.integers(0, 256, 64 * 1024 + int(rng.integers(1, 4096)), dtype=np.uint8)
        region = dev.get_mem_region(mem.name)
        region.write(mem.base + offset, data.tobytes())
        contents[f"{mem.name}@{offset:#x}"] = data.tobytes()
    npu = dev.get_reg_region("npu")
    npu.write(SCRATCH, int(rng.integers(1, 1 << 32)), relative=True)
    return contents


def _snapshot(dev: Device, contents: dict[str, bytes]) -> dict[str, object]:
    """What software sees: SCRATCH, the cycle counter's order, and the bytes at `contents`."""
    cfg = target(dev.target)
    seen: dict[str, object] = {"scratch": dev.get_reg_region("npu").read(SCRATCH, relative=True)}
    for where, data in contents.items():
        name, offset = where.split("@")
        base = cfg.memory(name).base + int(offset, 16)
        seen[where] = _read(dev, name, base, len(data))
    return seen


def test_round_trip_same_and_other_device(server: ServerProcess, tmp_path: Path) -> None:
    rng = np.random.default_rng(23)
    path = tmp_path / "state.npuckpt"
    with _open(server, "npu0") as dev:
        contents = _fill(dev, rng)
        expected = _snapshot(dev, contents)
        assert all(expected[k] == v for k, v in contents.items())
        saved_cycle = dev.checkpoint(path)
        _fill(dev, np.random.default_rng(7))  # scramble: other places, other SCRATCH
        for where, data in contents.items():  # and overwrite the saved places too
            name, offset = where.split("@")
            base = target(dev.target).memory(name).base + int(offset, 16)
            dev.get_mem_region(name).write(base, bytes(len(data)))
        assert _snapshot(dev, contents) != expected
        assert dev.restore(path) == saved_cycle
        assert _snapshot(dev, contents) == expected
    with _open(server, "npu1") as other:
        assert other.restore(path) == saved_cycle
        assert _snapshot(other, contents) == expected


def test_restored_device_runs_the_same(server: ServerProcess, tname: str, tmp_path: Path) -> None:
    """A DMA run after a restore moves the same bytes in the same simulated cycles, and the
    device's own cycle counter reads the same, as on the device the checkpoint came from."""
    cfg = target(tname)
    udma, plddr = cfg.memory("udma"), cfg.memory("plddr")
    path = tmp_path / "before-run.npuckpt"
    data = np.random.default_rng(5).integers(0, 256, 256 * 1024, dtype=np.uint8).tobytes()

    def run(dev: Device) -> tuple[bytes, int, int]:
        """A copy udma -> plddr -> udma; its cycles and the device's CYCLE counter after."""
        regs = dev.get_reg_region("dma")
        npu = dev.get_reg_region("npu")
        cycles_lo = npu.regmap.register("CYCLES_LO").offset  # type: ignore[union-attr]
        before = npu.read(cycles_lo, relative=True)
        for src, dst in (
            (udma.base, plddr.base + 0x10000),
            (plddr.base + 0x10000, udma.base + (8 << 20)),
        ):
            # Start and wait in one batch: between two requests a busy engine runs for as
            # long as the client takes (wall clock), which no two runs repeat.
            ops = dma.program_ops(cfg.dma_base, dma.DmaTransfer(src, dst, len(data)))
            values = regs.execute([*ops, *dma.readout_ops(cfg.dma_base, busy_wait_s=30)])
            out = dma.decode_readout(values[-4:-1])
            assert out.ok, out.describe()
        counter = npu.read(cycles_lo, relative=True)
        took = counter - before
        moved = _read(dev, "udma", udma.base + (8 << 20), len(data))
        return moved, took, counter

    with _open(server, "npu0") as dev:
        dev.get_mem_region("udma").write(udma.base, data)
        dev.checkpoint(path)
        original = run(dev)
    with _open(server, "npu1") as other:
        other.restore(path)
        again = run(other)
    assert original[0] == data and again[0] == data
    assert again[1] == original[1], "the same run took another number of cycles"
    assert again[2] == original[2], "the device's cycle counter differs after the same run"


def _damaged(path: Path, tmp_path: Path, key: SealKey) -> dict[str, Path]:
    raw = path.read_bytes()
    flipped = bytearray(raw)
    flipped[len(raw) // 2] ^= 0x40
    cases = {
        "corrupt": flipped,
        "truncated": raw[: len(raw) - 100],
        "empty": b"",
        "not a checkpoint": b"hello" * 100,
    }
    # Foreign but well-formed: another model build, another target (checksums made valid,
    # sealed again with the server's own key: what it refuses is then the content).
    ckpt = Checkpoint.parse(raw)
    ckpt.model_digest = "0123456789abcdef"
    cases["another build"] = ckpt.to_bytes(key)
    ckpt = Checkpoint.parse(raw)
    ckpt.target = "zg330" if ckpt.target == "buyi" else "buyi"
    cases["another target"] = ckpt.to_bytes(key)
    # Changed and its checksum made valid, but not sealed again (no key): the model state
    # is not the server's own.
    ckpt = Checkpoint.parse(raw)
    ckpt.cycle += 1
    cases["unsealed"] = ckpt.to_bytes()
    out = {}
    for name, data in cases.items():
        out[name] = tmp_path / f"{name.replace(' ', '-')}.npuckpt"
        out[name].write_bytes(data)
    return out


def test_bad_files_are_refused_and_change_nothing(
    server: ServerProcess, tmp_path: Path, key_file: Path
) -> None:
    rng = np.random.default_rng(11)
    good = tmp_path / "good.npuckpt"
    with _open(server, "npu0") as dev:
        _fill(dev, rng)
        dev.checkpoint(good)
        contents = _fill(dev, rng)  # the state the refusals must leave alone
        expected = _snapshot(dev, contents)
        reasons = {
            "corrupt": "sha256",
            "truncated": "sha256",
            "empty": "checkpoint",
            "not a checkpoint": "magic",
            "another build": "model build",
            "another target": "device is",
            "unsealed": "is not sealed",
        }
        for name, bad in _damaged(good, tmp_path, SealKey.from_file(key_file)).items():
            with pytest.raises(XrtError) as info:
                dev.restore(bad)
            assert reasons[name] in str(info.value), (name, str(info.value))
            assert info.value.code == 11011, (name, str(info.value))
            assert _snapshot(dev, contents) == expected, f"{name}: the refusal changed the device"


def test_busy_engine_is_refused_or_waited_for(
    server: ServerProcess, tname: str, tmp_path: Path
) -> None:
    cfg = target(tname)
    plddr = cfg.memory("plddr")
    # Millions of cycles (seconds of simulation): the engine runs on in the background
    # while the client sends its next request, and must still be busy when it arrives.
    big = 128 << 20
    copy = dma.DmaTransfer(plddr.base, plddr.base + (256 << 20), big)
    with _open(server, "npu0") as dev:
        regs = dev.get_reg_region("dma")
        regs.execute(dma.program_ops(cfg.dma_base, copy))
        with pytest.raises(XrtError, match="engine is running"):
            dev.checkpoint(tmp_path / "busy.npuckpt")
        assert not (tmp_path / "busy.npuckpt").exists()
        dev.checkpoint(tmp_path / "waited.npuckpt", wait_cycles=200_000_000)
        status = regs.read(regs.regmap.register("STATUS").offset, relative=True)  # type: ignore[union-attr]
        assert status & 1 == 0, "the checkpoint was taken with the DMA still busy"


def test_nothing_crosses_a_lease(server: ServerProcess, tmp_path: Path) -> None:
    """A holder restores a checkpoint full of data, then ends its lease: the next holder of
    that device sees a reset device with zeroed memories."""
    rng = np.random.default_rng(3)
    path = tmp_path / "secret.npuckpt"
    with _open(server, "npu0") as dev:
        contents = _fill(dev, rng)
        dev.checkpoint(path)
    with _open(server, "npu0") as dev:
        dev.restore(path)
        assert _snapshot(dev, contents)["scratch"] != 0
    with _open(server, "npu0") as dev:
        seen = _snapshot(dev, contents)
        assert seen["scratch"] == 0
        for where, data in contents.items():
            assert seen[where] == bytes(len(data)), f"{where} kept the previous lease's bytes"


def test_file_format(server: ServerProcess, tname: str, tmp_path: Path, key_file: Path) -> None:
    """The file: magic, header, zero pages left out, checksum at the end; `info` reads it."""
    path = tmp_path / "f.npuckpt"
    with _open(server, "npu0") as dev:
        cfg = target(dev.target)
        dev.get_mem_region("udma").write(cfg.memory("udma").base + (5 << 20), b"\x01" * 8192)
        dev.checkpoint(path)
    raw = path.read_bytes()
    assert path.stat().st_mode & 0o777 == 0o600, "the holder's data: its owner's only"
    assert raw.startswith(MAGIC)
    assert hashlib.sha256(raw[:-64]).digest() == raw[-64:-32]  # then the seal
    (hlen,) = struct.unpack_from("<I", raw, len(MAGIC))
    head = json.loads(raw[len(MAGIC) + 4 : len(MAGIC) + 4 + hlen])
    assert head["target"] == tname
    assert head["seal_key"] == SealKey.from_file(key_file).key_id
    mems = {s["name"]: s for s in head["sections"] if s["name"].startswith("mem:")}
    assert mems["mem:udma"]["pages"] == 2 and mems["mem:plddr"]["pages"] == 0
    assert len(raw) < 1 << 20, "zero pages must cost nothing"
    info = subprocess.run(
        [sys.executable, "-m", "npuemu", "checkpoint", "info", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=True,
    )
    assert json.loads(info.stdout)["memories"]["udma"]["touched"] == 8192
    with pytest.raises(CheckpointError, match="sha256"):
        Checkpoint.parse(raw[:-33] + bytes([raw[-33] ^ 1]) + raw[-32:])
    assert Checkpoint.parse(raw).authenticate(SealKey.from_file(key_file)) is None
    forged = raw[:-1] + bytes([raw[-1] ^ 1])  # a seal bit: the file still parses
    assert "does not match" in (
        Checkpoint.parse(forged).authenticate(SealKey.from_file(key_file)) or ""
    )


def test_warm_start(server: ServerProcess, tname: str, tmp_path: Path, key_file: Path) -> None:
    """serve --warm: every lease (the first, and the next after one that changed
    everything) starts from the checkpoint's state; a foreign --warm, or one this server's
    key did not seal, stops the server at start with the reason in one line."""
    rng = np.random.default_rng(9)
    path = tmp_path / "warm.npuckpt"
    with _open(server, "npu0") as dev:
        contents = _fill(dev, rng)
        expected = _snapshot(dev, contents)
        dev.checkpoint(path)
    keyed = ("--checkpoint-key-file", str(key_file))
    with ServerProcess.start(
        target=tname, devices=1, extra_args=("--warm", str(path), *keyed)
    ) as warm:
        for _ in range(2):
            with _open(warm, "npu0") as dev:
                assert _snapshot(dev, contents) == expected
                _fill(dev, np.random.default_rng(1))  # the next lease must not see this
    other = "zg330" if tname == "buyi" else "buyi"
    with (
        pytest.raises(RuntimeError, match="device is"),
        ServerProcess.start(target=other, devices=1, extra_args=("--warm", str(path), *keyed)),
    ):
        pass
    with (  # another key (this server's own): its model state is not this server's
        pytest.raises(RuntimeError, match="sealed by another server's key"),
        ServerProcess.start(target=tname, devices=1, extra_args=("--warm", str(path))),
    ):
        pass


def test_same_state_names_what_differs(server: ServerProcess, tmp_path: Path) -> None:
    """What a replay compares: equal states of two saves of one device compare equal (the
    simulation's time and context are not part of the state, and a checkpoint leaves the
    device as it found it), a byte of memory or of the model's state is named."""
    first, second = tmp_path / "a.npuckpt", tmp_path / "b.npuckpt"
    with _open(server, "npu0") as dev:
        _fill(dev, np.random.default_rng(2))
        dev.checkpoint(first)
        dev.checkpoint(second)  # later in simulated time, the same device state
    a, b = Checkpoint.parse(first.read_bytes()), Checkpoint.parse(second.read_bytes())
    assert a.same_state(b) is None
    mem = b.memories[0]
    changed = bytearray(b"".join(bytes(block) for _, block in mem.blocks()))
    changed[100] ^= 1
    b.memories[0] = MemoryImage(mem.name, mem.size, mem.pages, bytes(changed))
    assert a.same_state(b) == f"memory {mem.name}"
    state = bytearray(a.model_state)
    state[-40] ^= 1
    b = Checkpoint.parse(second.read_bytes())
    b.model_state = bytes(state)
    assert (a.same_state(b) or "").startswith("the model's state")
