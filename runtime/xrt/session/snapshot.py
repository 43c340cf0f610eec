"""Session snapshots: one file that recreates a ready session without preparing it again.

`Session.dump_snapshot(path)` (the manual's ``dumpSnapshot``) writes a zip archive:

- ``network.json`` and ``network.raw``: the session's network in the network file format
  (docs/network-format.md), validated again on load;
- ``backends/<i>/<name>``: each backend's prepared artefacts (`Backend.snapshot_state`:
  an NPU backend's compiled programs), so that loading does not compile again;
- ``snapshot.json``: the manifest, last: format and version, the view's op ids, per
  backend its class, the op ids bound to it, its options (`Backend.snapshot_options`) and
  the SHA-256 of each artefact, and the SHA-256 of every member; with a ``checksum`` of
  its own canonical form. Since program containers (``xrt compile``,
  `xrt.session.container`) it also says, at top level, the ``target`` and ``hardware``
  (version, compute-engine config, OCM bytes) the NPU programs were compiled for, the
  ``buffers`` (`xrt.session.buffers.BufferMapping`: inputs then outputs) and the
  ``placement`` (`PlacementReport.to_dict`). Those fields are optional in the format
  (their readers derive them when absent).

Version 2 numbers op ids as the Icraft manual does, the ``Input`` op 0 and the ``Output``
op last (`xrt.ops.boundary`); the manifest's view, bindings and program names hold those
ids, so a version-1 snapshot (ids from before the Input op) is refused, naming both
versions and how to make it again (`_check_version`), never loaded with shifted ids.

`Session.create_with_snapshot(path, backends, devices)` (a path, or the file's bytes)
checks all of it, refuses a device of another target than the manifest's naming both, binds each
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
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from xrt.backend import Backend, BindContext
from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkView, load_network, save_network
from xrt.session._binding import resolve_devices
from xrt.session.buffers import buffer_mappings
from xrt.session.placement import PlacementReport

__all__ = [
    "MAX_MEMBER_BYTES",
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_VERSION",
    "SnapshotBindings",
    "SnapshotContents",
    "SnapshotSource",
    "is_snapshot_file",
    "load_snapshot",
    "read_snapshot",
    "snapshot_network",
    "write_snapshot",
]

SNAPSHOT_FORMAT = "xrt-session-snapshot"
SNAPSHOT_VERSION = 2
"""The version written and the only one read (version 1 held op ids of before the Input
op; see the module docstring)."""
_MANIFEST = "snapshot.json"
_MAX_MANIFEST = 64 << 20
MAX_MEMBER_BYTES = 4 << 30
"""The largest member a snapshot may hold (network.raw: the weights)."""


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


class SnapshotSource(Protocol):
    """What `write_snapshot` reads of a session (`Session` is the one)."""

    network_view: NetworkView
    backends: list[Backend]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def backend_bindings(self) -> dict[int, Backend]: ...
    def placement(self) -> PlacementReport: ...


@dataclass(frozen=True)
class SnapshotBindings:
    """What `load_snapshot` restores, for ``Session(graph, backends, bindings)``.

    Attributes:
        graph: The view the snapshot's session ran.
        backends: The backends given, bound to their operators and devices, their options
            and prepared artefacts given back.
        bindings: Op id -> backend.
    """

    graph: NetworkView
    backends: list[Backend]
    bindings: dict[int, Backend]


def _top_level(session: SnapshotSource, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What a container says at top level: target and hardware of its NPU programs (from
    the first NPU backend's options), its buffer mappings and its placement."""
    npu = next((e["options"] for e in entries if e["ops"] and "target" in e["options"]), None)
    hardware = None
    if npu is not None:
        hardware = {k: npu.get(k) for k in ("hw_version", "config", "ocm_bytes")}
    values = session.network_view.network.values
    return {
        "target": npu["target"] if npu is not None else None,
        "hardware": hardware,
        "buffers": [b.to_dict() for b in buffer_mappings(session.inputs, session.outputs, values)],
        "placement": session.placement().to_dict(),
    }


def write_snapshot(session: SnapshotSource, path: str | os.PathLike[str]) -> None:
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
        **_top_level(session, entries),
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


@dataclass(frozen=True)
class SnapshotContents:
    """A snapshot read and checked (`read_snapshot`): its manifest and its members.

    Attributes:
        label: How errors name it (the path, or "a buffer of N bytes").
        manifest: ``snapshot.json``, checked (format, version, checksums, entries).
        blobs: Every member the manifest lists, by name.
    """

    label: str
    manifest: dict[str, Any]
    blobs: dict[str, bytes]


def _bad(label: str, why: str) -> XrtError:
    return XrtError(ErrorCode.LOAD_FAILED, f"snapshot {label}: {why}")


def is_snapshot_file(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a zip archive holding a snapshot manifest (by content: a
    container may have any name), or a zip archive too damaged to list: a container cut
    short loses the zip directory at its end, and is then reported as a damaged container
    by its loader, not as a bad ONNX file (no ONNX or network file starts as a zip)."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                return False
    except OSError:
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return _MANIFEST in zf.namelist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
        return True
    except OSError:
        return False


def _read_members(source: Path | bytes, label: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    if isinstance(source, Path):
        if not source.is_file():
            raise XrtError(ErrorCode.FILE_NOT_FOUND, f"snapshot {label} does not exist")
        size = source.stat().st_size
        opened: Path | io.BytesIO = source
    else:
        size = len(source)
        opened = io.BytesIO(source)
    try:
        with zipfile.ZipFile(opened) as zf:
            info = zf.getinfo(_MANIFEST) if _MANIFEST in zf.namelist() else None
            if info is None:
                raise _bad(label, f"no {_MANIFEST} (not a session snapshot)")
            if info.file_size > _MAX_MANIFEST:
                raise _bad(label, f"{_MANIFEST} is {info.file_size} bytes")
            manifest = json.loads(zf.read(_MANIFEST))
            if not isinstance(manifest, dict):
                raise _bad(label, f"{_MANIFEST} is not a JSON object")
            names = manifest.get("members")
            if not isinstance(names, dict):
                raise _bad(label, "the manifest lists no members")
            present = set(zf.namelist())
            total = 0
            for name in names:  # sizes first: nothing is read before all of them pass
                if name not in present:
                    raise _bad(label, f"member {name!r} is missing")
                info = zf.getinfo(name)
                if info.compress_type != zipfile.ZIP_STORED:
                    raise _bad(label, f"member {name!r} is compressed (xrt stores members)")
                if info.file_size > MAX_MEMBER_BYTES:
                    raise _bad(label, f"member {name!r} is {info.file_size} bytes")
                total += info.file_size
            if total > size:
                raise _bad(label, f"its members claim {total} bytes, more than the file holds")
            blobs = {name: zf.read(name) for name in names}
    except XrtError:
        raise
    except (RecursionError, MemoryError) as exc:
        raise _bad(label, f"unreadable ({type(exc).__name__})") from None
    except zipfile.BadZipFile as exc:
        if str(exc) == "File is not a zip file":  # the end-of-archive directory is gone
            raise _bad(
                label,
                f"truncated or damaged program container: its zip directory (the end of the "
                f"file) is missing or unreadable, in {size} bytes; copy the whole file again",
            ) from None
        raise _bad(label, f"damaged program container ({exc})") from None  # CRC mismatches
    except (zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise _bad(label, f"unreadable ({exc})") from None  # json errors are ValueErrors
    return manifest, blobs


def _check_version(label: str, version: object) -> None:
    """XrtError 11011 for any version but `SNAPSHOT_VERSION`, naming both and the remedy."""
    if version == SNAPSHOT_VERSION:
        return
    shown = str(version)[:40] if not isinstance(version, int | str) else repr(version)
    why = f"format version {shown}; this xrt reads format version {SNAPSHOT_VERSION}"
    if isinstance(version, int) and not isinstance(version, bool) and version < SNAPSHOT_VERSION:
        why += (
            " (since version 2 op ids count the Input op as 0, so the ids this file binds "
            "are not the network's): make it again from the network with this xrt, "
            "Session.dump_snapshot for a snapshot, xrt compile MODEL --target TARGET for a "
            "program container"
        )
    else:
        why += ": it was written by a newer xrt; upgrade xrt"
    raise _bad(label, why)


def _check_manifest(label: str, manifest: dict[str, Any], blobs: dict[str, bytes]) -> None:
    if manifest.get("format") != SNAPSHOT_FORMAT:
        raise _bad(label, f"format {manifest.get('format')!r} is not {SNAPSHOT_FORMAT!r}")
    _check_version(label, manifest.get("version"))
    claimed = manifest.get("checksum")
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    if claimed != _sha256(_canonical(body)):
        raise _bad(label, "the manifest's checksum does not match (edited or corrupt)")
    for name, digest in manifest["members"].items():
        if _sha256(blobs[name]) != digest:
            raise _bad(label, f"member {name!r} is corrupt (SHA-256 mismatch)")
    for key, kind in (("view", list), ("backends", list)):
        if not isinstance(manifest.get(key), kind):
            raise _bad(label, f"{key!r} must be a {kind.__name__}")
    for entry in manifest["backends"]:
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("class"), str)
            and isinstance(entry.get("ops"), list)
            and all(isinstance(i, int) for i in entry["ops"])
            and isinstance(entry.get("options"), dict)
            and isinstance(entry.get("state"), dict)
            and all(isinstance(m, str) and m in blobs for m in entry["state"].values())
        )
        if not ok:
            raise _bad(label, f"malformed backend entry {str(entry)[:200]}")
    target = manifest.get("target")
    if target is not None and not isinstance(target, str):
        raise _bad(label, f"target {str(target)[:100]} is not a name")


def read_snapshot(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview, *, label: str | None = None
) -> SnapshotContents:
    """Read and check a snapshot or program container, from a file or its bytes (see the
    module docstring for what is checked).

    Args:
        source: The file, or its bytes.
        label: How errors name it (default: the path, or "(a buffer of N bytes)").

    Raises:
        XrtError: 11002 for a missing file; 11011 naming the reason for anything corrupt,
            edited or malformed; 11010 for a source that is neither a path nor bytes.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        label = label or f"(a buffer of {len(data)} bytes)"
        manifest, blobs = _read_members(data, label)
    elif isinstance(source, str | os.PathLike):
        label = label or repr(str(source))
        manifest, blobs = _read_members(Path(source), label)
    else:
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"a snapshot is a path or bytes, not {type(source).__name__}"
        )
    _check_manifest(label, manifest, blobs)
    return SnapshotContents(label, manifest, blobs)


def snapshot_network(contents: SnapshotContents) -> Network:
    """The network a checked snapshot holds, loaded (and validated) again.

    Raises:
        XrtError: 11011 when it is missing or does not load.
    """
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("network.json", "network.raw"):
            if name not in contents.blobs:
                raise _bad(contents.label, f"member {name!r} is missing")
            (Path(tmp) / name).write_bytes(contents.blobs[name])
        try:
            return load_network(Path(tmp) / "network.json", Path(tmp) / "network.raw")
        except XrtError as exc:
            raise _bad(contents.label, f"its network does not load: {exc.message}") from None


def _backend_objects(
    contents: SnapshotContents, given: Sequence[type[Backend] | Backend]
) -> tuple[list[Backend], list[int]]:
    """The backend objects in the snapshot's order, and for each the index the caller gave
    it at: the manual passes ``{BuyiBackend, HostBackend}`` in any order, so backends are
    matched to the snapshot's entries by class (the first unused of each class)."""
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
    want = [e["class"] for e in contents.manifest["backends"]]
    have = [type(b).__name__ for b in objects]
    if sorted(want) != sorted(have):
        target = contents.manifest.get("target")
        given_targets = [b.TARGET for b in objects if b.TARGET]
        why = f"it was made with backends {want}, not {have}"
        if target and given_targets and target not in given_targets:
            why = (
                f"it was compiled for target {target!r} (backends {want}), but the backends "
                f"given are for {', '.join(map(repr, given_targets))} ({have})"
            )
        raise _bad(contents.label, why)
    order: list[int] = []
    for name in want:
        order.append(next(i for i, h in enumerate(have) if h == name and i not in order))
    return [objects[i] for i in order], order


def _check_device_targets(
    contents: SnapshotContents, devices: Sequence[Device | None] | None
) -> None:
    """A device of another target than the container's: refused before anything is bound,
    naming both (the backend's device check would only name the classes)."""
    target = contents.manifest.get("target")
    if not target or not isinstance(devices, Sequence):
        return
    for device in devices:
        got = device.target if isinstance(device, Device) else None  # others: refused later
        if got and got != target:
            raise _bad(
                contents.label,
                f"it was compiled for target {target!r}, but {device!r} is a {got!r} device "
                f"(compile it for {got!r}: xrt compile MODEL --target {got})",
            )


def load_snapshot(
    source: str | os.PathLike[str] | bytes | SnapshotContents,
    backends: Sequence[type[Backend] | Backend],
    devices: Sequence[Device | None] | None,
    *,
    verify: bool = False,
) -> SnapshotBindings:
    """The checked bindings of `Session.create_with_snapshot`, which makes the session and
    applies it; see the module docstring."""
    contents = source if isinstance(source, SnapshotContents) else read_snapshot(source)
    label, manifest, blobs = contents.label, contents.manifest, contents.blobs
    _check_device_targets(contents, devices)
    entries = manifest["backends"]
    objects, order = _backend_objects(contents, backends)
    if isinstance(devices, Sequence) and len(devices) == len(order):
        devices = [devices[i] for i in order]  # each device stays with its backend
    resolved = resolve_devices(objects, devices, "Session.create_with_snapshot")
    network = snapshot_network(contents)
    try:
        graph = network.view(manifest["view"])
    except XrtError as exc:
        raise _bad(label, f"its view does not fit its network: {exc.message}") from None
    bindings: dict[int, Backend] = {}
    for entry, backend, device in zip(entries, objects, resolved, strict=True):
        for op_id in entry["ops"]:
            if op_id in bindings or op_id not in graph.op_ids:
                raise _bad(label, f"op {op_id} is bound twice or outside the view")
            bindings[op_id] = backend
        if entry["ops"]:
            backend.init(network.view(entry["ops"]), device)
            state = {key: blobs[member] for key, member in entry["state"].items()}
            # Backends written before `verify` existed take two arguments: ask only when asked.
            extra = {"verify": True} if verify else {}
            try:
                backend.restore_snapshot(entry["options"], state, **extra)
            except XrtError as exc:
                if exc.code != ErrorCode.LOAD_FAILED or exc.message.startswith("snapshot "):
                    raise
                raise _bad(label, exc.message) from None
    if set(bindings) != set(graph.op_ids):
        raise _bad(label, f"ops {sorted(set(graph.op_ids) - set(bindings))} are not bound")
    ctx = BindContext(graph, bindings)
    for op in graph.ops:
        if not bindings[op.op_id].is_op_supported(op, ctx):
            raise _bad(
                label, f"{type(bindings[op.op_id]).__name__} no longer accepts {op.describe()}"
            )
    return SnapshotBindings(graph, objects, bindings)
