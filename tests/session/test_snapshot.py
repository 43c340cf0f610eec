"""Session snapshots (manual 1.1.3 and 1.2): dump_snapshot, then create_with_snapshot."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from netutil import random_feeds
from onnx_zoo import COMPOSITES
from tinynpu import TinyNpuBackend, manual_network

from xrt import ErrorCode, HostDevice, XrtError
from xrt.backend import Backend, HostBackend
from xrt.network import Network
from xrt.quant import calibrate, quantize_network
from xrt.session import Session


def _x(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)


class CompilingNpu(TinyNpuBackend):
    """A TinyNpu that 'compiles' at apply (counts it) and keeps the result in snapshots."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled: dict[str, bytes] = {}
        self.compiles = 0

    def _apply(self) -> None:
        if not self.compiled:
            self.compiles += 1
            assert self.network_view is not None
            self.compiled = {"program": repr(self.network_view.op_ids).encode()}

    def snapshot_state(self) -> dict[str, bytes]:
        return dict(self.compiled)

    def restore_snapshot(self, options: Mapping[str, Any], state: Mapping[str, bytes]) -> None:
        super().restore_snapshot(options, {})
        self.compiled = dict(state)


def _code(fn, *args) -> XrtError:  # type: ignore[no-untyped-def]
    with pytest.raises(XrtError) as e:
        fn(*args)
    return e.value


def test_snapshot_round_trip_is_bit_identical_and_does_not_prepare_again(tmp_path: Path) -> None:
    net = manual_network()
    sess = Session.create([CompilingNpu, HostBackend], net, [HostDevice.default(), None])
    sess.backends[0].auto_merge = False
    sess.apply()
    want = sess.forward([_x()])
    path = tmp_path / "manual.snapshot"
    sess.dump_snapshot(path)

    # The backend given asks to merge; the snapshot's options win (manual 1.1.3).
    given = CompilingNpu()
    assert given.auto_merge
    again = Session.create_with_snapshot(path, [given, HostBackend], [HostDevice.default(), None])
    assert again.applied and given.compiles == 0 and given.compiled == sess.backends[0].compiled
    assert not given.auto_merge
    assert {i: type(b) for i, b in again.backend_bindings().items()} == {
        i: type(b) for i, b in sess.backend_bindings().items()
    }
    got = again.forward([_x()])
    for a, b in zip(got, want, strict=True):
        assert a.numpy().tobytes() == b.numpy().tobytes()

    # The manual passes its backends as a set: any order is matched by class, and each
    # device stays with the backend it was given for.
    host = HostDevice.default()
    swapped = Session.create_with_snapshot(path, [HostBackend, CompilingNpu], [None, host])
    assert [type(b) for b in swapped.backends] == [CompilingNpu, HostBackend]
    assert swapped.backends[0].device is host
    assert swapped.backends[0].compiles == 0
    for a, b in zip(swapped.forward([_x()]), want, strict=True):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_snapshot_of_a_quantized_host_network(tmp_path: Path) -> None:
    model = COMPOSITES["small_cnn"]()
    net = Network.from_onnx(model)
    qnet = quantize_network(net, ranges=calibrate(net, [random_feeds(model, s) for s in range(2)]))
    sess = Session.create([HostBackend], qnet).apply()
    feeds = random_feeds(model, seed=9)
    want = sess.forward(feeds)
    sess.dump_snapshot(tmp_path / "q.snap")
    again = Session.create_with_snapshot(tmp_path / "q.snap", [HostBackend])
    for a, b in zip(again.forward(feeds), want, strict=True):
        assert a.numpy().tobytes() == b.numpy().tobytes()


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    sess = Session.create([TinyNpuBackend, HostBackend], manual_network()).apply()
    path = tmp_path / "s.snap"
    sess.dump_snapshot(path)
    return path


def _rewrite(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    edit(members)
    with zipfile.ZipFile(path, "w") as zf:
        for n, blob in members.items():
            zf.writestr(n, blob)


def test_corrupt_or_mismatched_snapshots_are_11011_with_the_reason(snapshot: Path) -> None:
    backends = [TinyNpuBackend, HostBackend]
    good = snapshot.read_bytes()

    def load() -> XrtError:
        return _code(Session.create_with_snapshot, snapshot, backends)

    # Other backends than it was made with.
    err = _code(Session.create_with_snapshot, snapshot, [HostBackend])
    assert err.code == ErrorCode.LOAD_FAILED and "made with backends" in err.message
    err = _code(Session.create_with_snapshot, snapshot, [HostBackend, HostBackend])
    assert err.code == ErrorCode.LOAD_FAILED and "made with backends" in err.message

    # A flipped byte anywhere: zip CRC, member SHA-256 or manifest checksum catches it.
    for pos in (100, len(good) // 2, len(good) - 200):
        bad = bytearray(good)
        bad[pos] ^= 0x40
        snapshot.write_bytes(bytes(bad))
        assert load().code == ErrorCode.LOAD_FAILED, pos
    snapshot.write_bytes(good[: len(good) // 3])  # truncated
    assert load().code == ErrorCode.LOAD_FAILED

    # A member edited consistently at the zip level still fails its SHA-256.
    snapshot.write_bytes(good)
    _rewrite(snapshot, lambda m: m.__setitem__("network.raw", m["network.raw"][:-1] + b"\x01"))
    err = load()
    assert err.code == ErrorCode.LOAD_FAILED and "network.raw" in err.message

    # An edited manifest fails its own checksum.
    snapshot.write_bytes(good)

    def edit_manifest(m: dict[str, bytes]) -> None:
        doc = json.loads(m["snapshot.json"])
        doc["backends"][0]["options"]["auto_merge"] = False
        m["snapshot.json"] = json.dumps(doc).encode()

    _rewrite(snapshot, edit_manifest)
    err = load()
    assert err.code == ErrorCode.LOAD_FAILED and "checksum" in err.message

    snapshot.write_bytes(b"not a zip")
    assert load().code == ErrorCode.LOAD_FAILED
    snapshot.unlink()
    assert load().code == ErrorCode.FILE_NOT_FOUND


def test_snapshot_needs_apply_and_a_writable_place(tmp_path: Path) -> None:
    sess = Session.create([TinyNpuBackend, HostBackend], manual_network())
    assert _code(sess.dump_snapshot, tmp_path / "x").code == ErrorCode.WRONG_ORDER
    sess.apply()
    err = _code(sess.dump_snapshot, tmp_path / "missing" / "dir" / "x")
    assert err.code == ErrorCode.FILE_NOT_FOUND
    assert not list(tmp_path.iterdir()), "no partial file left behind"


def test_a_backend_without_state_refuses_state_it_does_not_know() -> None:
    b: Backend = HostBackend()
    err = _code(b.restore_snapshot, {"auto_merge": True}, {"program": b"x"})
    assert err.code == ErrorCode.LOAD_FAILED and "program" in err.message


def test_a_snapshot_that_would_expand_or_nest_without_end_is_11011(snapshot: Path) -> None:
    """Defects: members were read whole before any size check (a 1 MiB zip with a 1 GiB
    member: 2 GiB of memory, then 11011; a 4 GiB one: a bare MemoryError), and a manifest
    nested 100,000 deep raised RecursionError. Now members must be stored uncompressed (as
    xrt writes them) and fit the file, sizes are checked before reading, and any malformed
    JSON is 11011."""
    backends = [TinyNpuBackend, HostBackend]
    good = snapshot.read_bytes()

    # A small file declaring a 1 GiB member (deflated zeros): refused before reading.
    with zipfile.ZipFile(snapshot) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    with zipfile.ZipFile(snapshot, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        doc = json.loads(members["snapshot.json"])
        doc["members"]["bomb.bin"] = "sha256:0"
        for n, blob in members.items():
            zf.writestr(n, json.dumps(doc).encode() if n == "snapshot.json" else blob)
        with zf.open("bomb.bin", "w", force_zip64=True) as f:
            zeros = bytes(16 << 20)
            for _ in range(64):  # 1 GiB
                f.write(zeros)
    assert snapshot.stat().st_size < 8 << 20
    err = _code(Session.create_with_snapshot, snapshot, backends)
    assert err.code == ErrorCode.LOAD_FAILED and "compressed" in err.message, err.message

    # A manifest nested 100,000 deep.
    snapshot.write_bytes(good)
    _rewrite(snapshot, lambda m: m.__setitem__("snapshot.json", b"[" * 100_000 + b"]" * 100_000))
    err = _code(Session.create_with_snapshot, snapshot, backends)
    assert err.code == ErrorCode.LOAD_FAILED and "unreadable" in err.message, err.message
