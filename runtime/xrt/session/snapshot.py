"""Session snapshots: one file that recreates a ready session without preparing it again.

`Session.dump_snapshot(path)` (the manual's ``dumpSnapshot``) writes a zip archive:

- ``network.json`` and ``network.raw``: the session's network in the network file format
  (docs/network-format.md), validated again on load;
- ``backends/<i>/<name>``: each backend's prepared artefacts (`Backend.snapshot_state`:
  an NPU backend's compiled programs), so that loading does not compile again;
- ``snapshot.json``: the manifest, last: format and version, the view's op ids, per
  backend its class, the op ids bound to it, its options (`Backend.snapshot_options`) and
  the SHA-256 of each artefact, and the SHA-256 of every member; with a ``checksum`` of
  its own canonical form.

`Session.create_with_snapshot(path, backends, devices)` checks all of it, binds each
backend to its op ids and device, gives it its options and artefacts back
(`Backend.restore_snapshot`), and applies the session. As the manual says, options that
shape the prepared result (merging) come from the snapshot, not from the backend objects
given. Anything missing, corrupt or made for other backends is XrtError 11011 naming why.

A snapshot is read as untrusted bytes: every member is stored uncompressed (as
`write_snapshot` writes them; a compressed member is refused, so a small file cannot
expand into a large one), its size is checked against `MAX_MEMBER_BYTES` and the total
against the file's own size before anything is read, and malformed JSON of any depth is an
11011, never another exception. Whether its compiled programs may be trusted is the
loader's choice: `Session.create_with_snapshot(..., verify=True)` checks them against the
network (docs/session.md, "Snapshots").
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xrt.backend import Backend, BindContext
from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.network import load_network, save_network
from xrt.session._binding import resolve_devices

if TYPE_CHECKING:
    from xrt.session._session import Session

__all__ = [
    "MAX_MEMBER_BYTES",
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_VERSION",
    "load_snapshot",
    "write_snapshot",
]

SNAPSHOT_FORMAT = "xrt-session-snapshot"
SNAPSHOT_VERSION = 1
_MANIFEST = "snapshot.json"
_MAX_MANIFEST = 64 << 20
MAX_MEMBER_BYTES = 4 << 30
"""The largest member a snapshot may hold (network.raw: the weights)."""


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def write_snapshot(session: Session, path: str | os.PathLike[str]) -> None:
    """Write `session` (applied) to `path`; see the module docstring."""
    view = session.network_view
    network = view.network
    members: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        save_network(network, Path(tmp) / "network.json", Path(tmp) / "network.raw")
        for name in ("network.json", "network.raw"):
            members[name] = (Path(tmp) / name).read_bytes()
    bindings = session.backend_bindings()
    entries = []
    for i, backend in enumerate(session.backends):
        ops = [op_id for op_id in view.op_ids if bindings[op_id] is backend]
        state = backend.snapshot_state() if ops else {}
        files = {}
        for key, blob in state.items():
            if not isinstance(key, str) or "/" in key or not key:
                raise XrtError(
                    ErrorCode.BACKEND_INTERNAL,
                    f"{type(backend).__name__}.snapshot_state: bad artefact name {key!r}",
                )
            member = f"backends/{i}/{key}"
            members[member] = bytes(blob)
            files[key] = member
        entries.append(
            {
                "class": type(backend).__name__,
                "module": type(backend).__module__,
                "ops": ops,
                "options": backend.snapshot_options() if ops else {},
                "state": files,
            }
        )
    manifest: dict[str, Any] = {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "network": network.name,
        "view": list(view.op_ids),
        "backends": entries,
        "members": {name: _sha256(blob) for name, blob in members.items()},
    }
    manifest["checksum"] = _sha256(_canonical(manifest))
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED) as zf:
            for name, blob in members.items():
                zf.writestr(name, blob)
            zf.writestr(_MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
        os.replace(partial, target)  # never a half-written snapshot under the real name
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise XrtError(
            ErrorCode.FILE_NOT_FOUND, f"cannot write snapshot {str(target)!r}: {exc}"
        ) from None


def _bad(path: Path, why: str) -> XrtError:
    return XrtError(ErrorCode.LOAD_FAILED, f"snapshot {str(path)!r}: {why}")


def _read_members(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    if not path.is_file():
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"snapshot {str(path)!r} does not exist")
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo(_MANIFEST) if _MANIFEST in zf.namelist() else None
            if info is None:
                raise _bad(path, f"no {_MANIFEST} (not a session snapshot)")
            if info.file_size > _MAX_MANIFEST:
                raise _bad(path, f"{_MANIFEST} is {info.file_size} bytes")
            manifest = json.loads(zf.read(_MANIFEST))
            if not isinstance(manifest, dict):
                raise _bad(path, f"{_MANIFEST} is not a JSON object")
            names = manifest.get("members")
            if not isinstance(names, dict):
                raise _bad(path, "the manifest lists no members")
            present = set(zf.namelist())
            total = 0
            for name in names:  # sizes first: nothing is read before all of them pass
                if name not in present:
                    raise _bad(path, f"member {name!r} is missing")
                info = zf.getinfo(name)
                if info.compress_type != zipfile.ZIP_STORED:
                    raise _bad(path, f"member {name!r} is compressed (xrt stores members)")
                if info.file_size > MAX_MEMBER_BYTES:
                    raise _bad(path, f"member {name!r} is {info.file_size} bytes")
                total += info.file_size
            if total > path.stat().st_size:
                raise _bad(path, f"its members claim {total} bytes, more than the file holds")
            blobs = {name: zf.read(name) for name in names}
    except XrtError:
        raise
    except (RecursionError, MemoryError) as exc:
        raise _bad(path, f"unreadable ({type(exc).__name__})") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        # zipfile reports CRC mismatches as BadZipFile; json errors are ValueErrors.
        raise _bad(path, f"unreadable ({exc})") from None
    return manifest, blobs


def _check_manifest(path: Path, manifest: dict[str, Any], blobs: dict[str, bytes]) -> None:
    if manifest.get("format") != SNAPSHOT_FORMAT:
        raise _bad(path, f"format {manifest.get('format')!r} is not {SNAPSHOT_FORMAT!r}")
    version = manifest.get("version")
    if version != SNAPSHOT_VERSION:
        raise _bad(path, f"version {version!r}; this xrt reads version {SNAPSHOT_VERSION}")
    claimed = manifest.get("checksum")
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    if claimed != _sha256(_canonical(body)):
        raise _bad(path, "the manifest's checksum does not match (edited or corrupt)")
    for name, digest in manifest["members"].items():
        if _sha256(blobs[name]) != digest:
            raise _bad(path, f"member {name!r} is corrupt (SHA-256 mismatch)")
    for key, kind in (("view", list), ("backends", list)):
        if not isinstance(manifest.get(key), kind):
            raise _bad(path, f"{key!r} must be a {kind.__name__}")
    for entry in manifest["backends"]:
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("class"), str)
            and isinstance(entry.get("ops"), list)
            and all(isinstance(i, int) for i in entry["ops"])
            and isinstance(entry.get("options"), dict)
            and isinstance(entry.get("state"), dict)
            and all(m in blobs for m in entry["state"].values())
        )
        if not ok:
            raise _bad(path, f"malformed backend entry {str(entry)[:200]}")


def _backend_objects(
    path: Path, entries: list[dict[str, Any]], given: Sequence[type[Backend] | Backend]
) -> list[Backend]:
    if isinstance(given, type | Backend) or not isinstance(given, Sequence):
        raise XrtError(ErrorCode.WRONG_TYPE, "create_with_snapshot takes a list of backends")
    objects = []
    for b in given:
        if isinstance(b, type) and issubclass(b, Backend) and b is not Backend:
            objects.append(b())
        elif isinstance(b, Backend):
            if b.initialized:
                raise XrtError(
                    ErrorCode.WRONG_ORDER, f"create_with_snapshot: {b!r} is already bound"
                )
            objects.append(b)
        else:
            raise XrtError(ErrorCode.WRONG_TYPE, f"create_with_snapshot: {b!r} is not a Backend")
    want = [e["class"] for e in entries]
    have = [type(b).__name__ for b in objects]
    if want != have:
        raise _bad(path, f"it was made with backends {want}, not {have}")
    return objects


def load_snapshot(
    session_cls: type[Session],
    path: str | os.PathLike[str],
    backends: Sequence[type[Backend] | Backend],
    devices: Sequence[Device | None] | None,
    *,
    verify: bool = False,
) -> Session:
    """`Session.create_with_snapshot`; see the module docstring."""
    where = Path(path)
    manifest, blobs = _read_members(where)
    _check_manifest(where, manifest, blobs)
    entries = manifest["backends"]
    objects = _backend_objects(where, entries, backends)
    resolved = resolve_devices(objects, devices, "Session.create_with_snapshot")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("network.json", "network.raw"):
            if name not in blobs:
                raise _bad(where, f"member {name!r} is missing")
            (Path(tmp) / name).write_bytes(blobs[name])
        try:
            network = load_network(Path(tmp) / "network.json", Path(tmp) / "network.raw")
        except XrtError as exc:
            raise _bad(where, f"its network does not load: {exc.message}") from None
    try:
        graph = network.view(manifest["view"])
    except XrtError as exc:
        raise _bad(where, f"its view does not fit its network: {exc.message}") from None
    bindings: dict[int, Backend] = {}
    for entry, backend, device in zip(entries, objects, resolved, strict=True):
        for op_id in entry["ops"]:
            if op_id in bindings or op_id not in graph.op_ids:
                raise _bad(where, f"op {op_id} is bound twice or outside the view")
            bindings[op_id] = backend
        if entry["ops"]:
            backend.init(network.view(entry["ops"]), device)
            state = {key: blobs[member] for key, member in entry["state"].items()}
            # Backends written before `verify` existed take two arguments: ask only when asked.
            extra = {"verify": True} if verify else {}
            backend.restore_snapshot(entry["options"], state, **extra)
    if set(bindings) != set(graph.op_ids):
        raise _bad(where, f"ops {sorted(set(graph.op_ids) - set(bindings))} are not bound")
    ctx = BindContext(graph, bindings)
    for op in graph.ops:
        if not bindings[op.op_id].is_op_supported(op, ctx):
            raise _bad(
                where, f"{type(bindings[op.op_id]).__name__} no longer accepts {op.describe()}"
            )
    return session_cls(graph, objects, bindings).apply()
