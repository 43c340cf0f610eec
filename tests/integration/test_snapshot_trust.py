"""An edited session snapshot cannot change what other sessions compute: its programs serve
only the session made from it, and ``verify=True`` refuses it. Real server, real engine.

The edit is the one an attacker can make: change a compiled program (here every STORE
clamps to [0, 0]) and recompute every checksum the snapshot carries."""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import random_feeds
from onnx_zoo import COMPOSITES
from test_npu_backends import _host, _quantized

from xrt import ErrorCode, XrtError
from xrt.backend import BuyiBackend, HostBackend
from xrt.backend.npu import PROGRAM_CACHE
from xrt.backend.npu._serialize import program_from_bytes, program_to_bytes
from xrt.hw import isa
from xrt.npu_device import NpuDevice
from xrt.session import Session

pytestmark = pytest.mark.sim


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def poison(path: Path) -> int:
    """Make every STORE of every program in the snapshot at `path` write zeros, and reseal
    it (member and manifest checksums recomputed). Returns how many programs changed."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(members["snapshot.json"])
    changed = 0
    for entry in doc["backends"]:
        for key, member in entry["state"].items():
            prog = program_from_bytes(members[member], key)
            prog.instructions = [
                i.replace(lo=0, hi=0) if isinstance(i, isa.Store) else i for i in prog.instructions
            ]
            members[member] = program_to_bytes(prog)
            doc["members"][member] = _sha(members[member])
            changed += 1
    body = {k: v for k, v in doc.items() if k != "checksum"}
    doc["checksum"] = _sha(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    members["snapshot.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, blob in members.items():
            zf.writestr(n, blob)
    return changed


def test_an_edited_snapshot_changes_no_other_session(
    open_buyi: Callable[..., NpuDevice], tmp_path: Path
) -> None:
    """Defect: restore_snapshot put the snapshot's programs into the process-wide program
    cache under the key of the network they claim to implement, unchecked: after loading an
    edited snapshot, a new session built from the original network returned its results."""
    buyi = open_buyi()
    model = COMPOSITES["small_cnn"]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=3)
    want = _host(qnet, feeds)
    path = tmp_path / "small_cnn.snapshot"
    with Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply() as sess:
        sess.dump_snapshot(path)
    assert poison(path) >= 1
    PROGRAM_CACHE.clear()

    # The loader gets what it asked for: the edited programs, in its own session only.
    with Session.create_with_snapshot(path, [BuyiBackend, HostBackend], [buyi, None]) as edited:
        got = [t.numpy() for t in edited.forward(feeds)]
        assert any(not np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    # Another session of the original network compiles its own programs: correct results.
    with Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply() as fresh:
        for g, w in zip(fresh.forward(feeds), want, strict=True):
            np.testing.assert_array_equal(g.numpy(), w)
    # An untrusted snapshot, verified: refused, naming why.
    with pytest.raises(XrtError) as err:
        Session.create_with_snapshot(path, [BuyiBackend, HostBackend], [buyi, None], verify=True)
    assert err.value.code == ErrorCode.LOAD_FAILED and "edited or foreign" in err.value.message


def test_a_verified_snapshot_loads_and_runs_bit_exact(
    open_buyi: Callable[..., NpuDevice], tmp_path: Path
) -> None:
    buyi = open_buyi()
    model = COMPOSITES["small_cnn"]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=4)
    path = tmp_path / "good.snapshot"
    with Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply() as sess:
        sess.dump_snapshot(path)
    with Session.create_with_snapshot(
        path, [BuyiBackend, HostBackend], [buyi, None], verify=True
    ) as again:
        for g, w in zip(again.forward(feeds), _host(qnet, feeds), strict=True):
            np.testing.assert_array_equal(g.numpy(), w)
