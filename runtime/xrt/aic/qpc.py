"""`Qpc`: a program container as the AIC100 runtime's ``Qpc`` presents it.

A QPC ("Qualcomm program container") is what the AIC100 compiler writes and the runtime
loads: the compiled programs, the constants, and the buffer mappings of the network's
inputs and outputs. Ours is the program container ``xrt compile`` writes
(`xrt.session.container`), a session snapshot compiled without a device. `Qpc` reads one
from a file or from bytes, with every check of `xrt.session.snapshot.read_snapshot`
(a container is untrusted input), and answers what it holds: `Qpc.info`,
`Qpc.buffer_mappings` (inputs then outputs, the order of an inference's buffers),
`Qpc.network`; `Qpc.create_session` loads it on a device of its target. `QpcFile` is the
AIC100 file class (a base path and a file name, ``programqpc.bin`` by default, loaded into
a buffer); `Qpc.io_descriptor` the container's I/O description as bytes;
`Qpc.buffer_mappings_dma` the buffers as device memory holds them; `QpcInfo.constants` the
constants it carries (`QpcConstantsInfo`).

A manifest without the optional buffer mappings and placement is read too: what is
missing is derived from the network and the bindings. Containers of snapshot format
version 1 (op ids of before the Input op) are refused, saying to compile them again
(`xrt.session.snapshot`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from xrt.backend import Backend, backend_types
from xrt.backend.npu import program_from_bytes
from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkView
from xrt.session._session import Session
from xrt.session._units import ValueFlow
from xrt.session.buffers import BufferMapping, buffer_mappings
from xrt.session.placement import placement_lines, placement_report
from xrt.session.snapshot import (
    SnapshotContents,
    load_snapshot,
    read_snapshot,
    snapshot_network,
)

__all__ = ["DEFAULT_QPC_FILENAME", "BufferMapping", "Qpc", "QpcConstantsInfo", "QpcFile", "QpcInfo"]

DEFAULT_QPC_FILENAME = "programqpc.bin"
"""The file name `QpcFile` takes by default (the AIC100 compiler's)."""


@dataclass(frozen=True)
class QpcConstantsInfo:
    """One segment of constants a container carries (the AIC100 ``QpcConstantsInfo``).

    Attributes:
        name: ``program_<op ids>`` for an NPU program's constants (its weights, biases,
            requantization and lookup rows, uploaded with it), else the name of a network
            parameter a host operator reads.
        index: Its place in `QpcInfo.constants`.
        size: Bytes.
    """

    name: str
    index: int
    size: int


@dataclass(frozen=True)
class QpcInfo:
    """What a program container holds (the AIC100 ``QpcInfo``, in xrt's terms).

    Attributes:
        format_version: The snapshot format version of the file.
        network: The network's name.
        target: The NPU target its programs were compiled for (``"buyi"``, ``"zg330"``;
            None for a host-only snapshot).
        hw_version: The hardware version they were compiled for (None when not recorded).
        hw_config: The compute engine's configuration they were compiled for.
        ocm_bytes: The on-chip memory they may use (0 on Buyi; None when not recorded).
        ops: Operators in the session's view.
        op_counts: Backend class name -> operators bound to it, in the session's order.
        npu_programs: Compiled NPU programs in the container.
        placement: The placement report (`PlacementReport.to_dict`): counts per backend,
            and every quantized operator left on the host with the compiler's reason.
        buffer_mappings: The input then output buffers.
        constants: The constants it carries: each NPU program's, then the host operators'
            parameters.
    """

    format_version: int
    network: str
    target: str | None
    hw_version: str | None
    hw_config: dict[str, Any] | None
    ocm_bytes: int | None
    ops: int
    op_counts: dict[str, int]
    npu_programs: int
    placement: dict[str, Any]
    buffer_mappings: tuple[BufferMapping, ...]
    constants: tuple[QpcConstantsInfo, ...] = ()

    def placement_lines(self) -> list[str]:
        """The placement as `PlacementReport.summary_lines` prints it."""
        return placement_lines(self.placement)

    def summary_lines(self) -> list[str]:
        """The container in a few lines: target and hardware, programs, placement, buffers."""
        hw = f"hardware {self.hw_version or '?'}"
        if self.ocm_bytes:
            hw += f", {self.ocm_bytes} B on-chip memory"
        target = f"target {self.target} ({hw})" if self.target else "no NPU target"
        lines = [
            f"network {self.network!r}: {self.ops} op(s); {target}; "
            f"{self.npu_programs} NPU program(s)",
            *self.placement_lines(),
            "buffers:",
        ]
        for b in self.buffer_mappings:
            lines.append(
                f"  [{b.index}] {b.direction:<3} {b.name!r}: {b.dtype}{list(b.shape)}, {b.size} B"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``xrt compile --json``)."""
        return {
            "format_version": self.format_version,
            "network": self.network,
            "target": self.target,
            "hardware": {
                "version": self.hw_version,
                "config": self.hw_config,
                "ocm_bytes": self.ocm_bytes,
            },
            "ops": self.ops,
            "op_counts": dict(self.op_counts),
            "npu_programs": self.npu_programs,
            "placement": self.placement,
            "buffers": [b.to_dict() for b in self.buffer_mappings],
            "constants": [
                {"name": c.name, "index": c.index, "size": c.size} for c in self.constants
            ],
        }


def _known_backends() -> dict[str, type[Backend]]:
    """Backend classes a container may name: the registered ones (never a class imported
    by the name an untrusted manifest gives)."""
    return {t.__name__: t for t in backend_types().values()}


class Qpc:
    """A program container, read and checked (the AIC100 ``Qpc``); make one with
    `from_file` or `from_buffer`."""

    def __init__(self, data: bytes, contents: SnapshotContents) -> None:
        self._data = data
        self._contents = contents
        self._network: Network | None = None
        self._info: QpcInfo | None = None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Qpc:
        """Read the container at `path` (``Qpc::Factory(path)``).

        Raises:
            XrtError: 11002 for a missing file; 11011 naming the reason for a corrupt,
                edited or malformed one.
        """
        where = Path(path)
        if not where.is_file():
            raise XrtError(ErrorCode.FILE_NOT_FOUND, f"container {str(where)!r} does not exist")
        try:
            data = where.read_bytes()
        except OSError as exc:
            raise XrtError(
                ErrorCode.FILE_NOT_FOUND, f"container {str(where)!r}: {exc.strerror}"
            ) from None
        return cls(data, read_snapshot(data, label=repr(str(where))))

    @classmethod
    def from_buffer(cls, data: bytes | bytearray | memoryview) -> Qpc:
        """Read a container from its bytes (``Qpc::Factory(buffer, size)``); no file needed.

        Raises:
            XrtError: 11010 for something other than bytes; 11011 naming the reason for
                corrupt, edited or malformed bytes.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"Qpc.from_buffer takes bytes, not {type(data).__name__}"
            )
        blob = bytes(data)
        return cls(blob, read_snapshot(blob))

    # -- what it holds --------------------------------------------------------------------

    @property
    def target(self) -> str | None:
        """The NPU target the programs were compiled for (None: host only)."""
        return self.info().target

    def buffer(self) -> bytes:
        """The container's bytes (``Qpc::buffer()``)."""
        return self._data

    @property
    def size(self) -> int:
        """The container's size in bytes (``Qpc::size()``)."""
        return len(self._data)

    def network(self) -> Network:
        """The network the container holds (validated when first asked for).

        Raises:
            XrtError: 11011 when it does not load.
        """
        if self._network is None:
            self._network = snapshot_network(self._contents)
        return self._network

    def buffer_mappings(self) -> list[BufferMapping]:
        """The input then output buffers, in mapping order (``getBufferMappings()``)."""
        return list(self.info().buffer_mappings)

    def buffer_mappings_dma(self) -> list[BufferMapping]:
        """The buffers as they are when the caller places them in device memory the NPU
        reaches (``getBufferMappingsDma()``: DMA buffers, not the user's heap). On ZG330
        the engine stores an int8 output of one of its programs straight into such a
        buffer (manual 1.3.2) in its own layout, channel tiles of the engine's block over
        NCHW: that mapping says so (`BufferMapping.hw_layout` ``"C16"``) with the tiles'
        size. Everything else is copied, in the logical layout, as on the heap (every
        buffer of a Buyi or host-only container).
        """
        info = self.info()
        block = (info.hw_config or {}).get("block")
        types = [t for t in self.backend_types() if not t.is_host and t.DIRECT_OUTPUTS]
        if not types or not isinstance(block, int) or block < 1:
            return list(info.buffer_mappings)
        npu_ops = {
            op_id
            for e in self._contents.manifest["backends"]
            if "target" in e["options"]
            for op_id in e["ops"]
        }
        network = self.network()
        producer = {v: op for op in network.ops for v in op.outputs}
        out = []
        for b in info.buffer_mappings:
            op = producer.get(b.name)
            ttype = network.values.get(b.name)
            engine_stored = (
                b.direction == "out"
                and op is not None
                and op.op_id in npu_ops
                and op.op_type != "Cast"  # the driver's conversion, on the host CPU
                and ttype is not None
                and b.dtype == "SInt8"
                and len(b.shape) in (2, 4)
                and -1 not in b.shape
            )
            if engine_stored:
                channels = -(-b.shape[1] // block) * block
                size = b.size // b.shape[1] * channels
                b = replace(b, size=size, hw_layout=f"C{block}")
            out.append(b)
        return out

    def io_descriptor(self) -> bytes:
        """The container's I/O description (``getIoDescriptor()``: a buffer and its length):
        its buffer mappings as JSON bytes, in mapping order."""
        doc = {"buffers": [b.to_dict() for b in self.info().buffer_mappings]}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def info(self) -> QpcInfo:
        """What the container holds (``getInfo()``).

        Raises:
            XrtError: 11011 for malformed manifest fields.
        """
        if self._info is None:
            self._info = self._read_info()
        return self._info

    def backend_types(self) -> list[type[Backend]]:
        """The backend classes the container binds operators to, in its order.

        Raises:
            XrtError: 11011 naming a backend this runtime does not have.
        """
        known = _known_backends()
        out = []
        for entry in self._contents.manifest["backends"]:
            t = known.get(entry["class"])
            if t is None:
                raise self._bad(f"it was made with backend {entry['class']!r}, unknown here")
            out.append(t)
        return out

    def create_session(self, device: Device | None = None, *, verify: bool = False) -> Session:
        """A ready (applied) session running the container on `device`: its backends (the
        target's NPU backend and the host, as the manifest lists them) loaded as
        ``Session.create_with_snapshot`` loads them, `device` for the NPU backend.

        Args:
            device: A device of the container's target (None: the backends' defaults,
                enough for a host-only container).
            verify: Compile every program again and refuse the container unless they are
                the same bytes (a container from someone else).

        Raises:
            XrtError: 11011 for a device of another target (both named), another hardware
                configuration or version, or (with `verify`) programs that differ; as
                ``Session.create_with_snapshot``.
        """
        types = self.backend_types()
        devices: list[Device | None] = [None if t.is_host else device for t in types]
        restored = load_snapshot(self._contents, types, devices, verify=verify)
        return Session(restored.graph, restored.backends, restored.bindings).apply()

    # -- reading the manifest -------------------------------------------------------------

    def _bad(self, why: str) -> XrtError:
        return XrtError(ErrorCode.LOAD_FAILED, f"container {self._contents.label}: {why}")

    def _read_info(self) -> QpcInfo:
        manifest = self._contents.manifest
        entries = manifest["backends"]
        npu = next((e["options"] for e in entries if "target" in e["options"]), {})
        hardware = manifest.get("hardware") if "hardware" in manifest else npu or None
        if hardware is not None and not isinstance(hardware, dict):
            raise self._bad("its hardware field is not an object")
        hardware = hardware or {}
        counts: dict[str, int] = {}
        for e in entries:
            counts[e["class"]] = counts.get(e["class"], 0) + len(e["ops"])
        programs = sum(len(e["state"]) for e in entries if "target" in e["options"])
        version, config, ocm = (
            hardware.get("hw_version"),
            hardware.get("config"),
            hardware.get("ocm_bytes"),
        )
        if not (
            isinstance(version, str | None)
            and isinstance(config, dict | None)
            and isinstance(ocm, int | None)
        ):
            raise self._bad("malformed hardware field")
        return QpcInfo(
            format_version=int(manifest["version"]),
            network=str(manifest.get("network", "")),
            target=manifest.get("target", npu.get("target")),
            hw_version=version,
            hw_config=config,
            ocm_bytes=ocm,
            ops=len(manifest["view"]),
            op_counts=counts,
            npu_programs=programs,
            placement=self._placement(list(counts)),
            buffer_mappings=self._buffers(),
            constants=self._constants(),
        )

    def _constants(self) -> tuple[QpcConstantsInfo, ...]:
        manifest, blobs = self._contents.manifest, self._contents.blobs
        sizes: list[tuple[str, int]] = []
        host_ops: list[int] = []
        for entry in manifest["backends"]:
            if "target" not in entry["options"]:
                host_ops += entry["ops"]
                continue
            for key, member in sorted(entry["state"].items()):
                sizes.append((key, len(program_from_bytes(blobs[member], key).constants)))
        network = self.network()
        seen: set[str] = set()
        for op_id in host_ops:
            for param in network.op(op_id).params.values():
                if param not in seen:
                    seen.add(param)
                    sizes.append((param, int(network.params[param].nbytes)))
        return tuple(QpcConstantsInfo(n, i, size) for i, (n, size) in enumerate(sizes))

    def _view(self) -> NetworkView:
        try:
            return self.network().view(self._contents.manifest["view"])
        except XrtError as exc:
            raise self._bad(f"its view does not fit its network: {exc.message}") from None

    def _buffers(self) -> tuple[BufferMapping, ...]:
        stored = self._contents.manifest.get("buffers")
        if stored is None:  # written before containers: derive them from the network
            flow = ValueFlow(self._view())
            return tuple(buffer_mappings(flow.inputs, flow.outputs, flow.values))
        if not isinstance(stored, list):
            raise self._bad("its buffers field is not a list")
        return tuple(BufferMapping.from_dict(b) for b in stored)

    def _placement(self, order: list[str]) -> dict[str, Any]:
        stored = self._contents.manifest.get("placement")
        if stored is None:  # written before containers: ask the backends again
            graph = self._view()
            objects = [t() for t in self.backend_types()]
            bindings = {
                op_id: b
                for e, b in zip(self._contents.manifest["backends"], objects, strict=True)
                for op_id in e["ops"]
            }
            return placement_report(graph, objects, bindings).to_dict()
        ok = (
            isinstance(stored, dict)
            and isinstance(stored.get("counts"), dict)
            and all(type(n) is int for n in stored["counts"].values())
            and isinstance(stored.get("host_quantized", []), list)
            and all(
                isinstance(p, Mapping) and isinstance(p.get("reasons", {}), Mapping)
                for p in stored.get("host_quantized", [])
            )
            and isinstance(stored.get("left_out", {}), Mapping)
            and all(isinstance(w, str) for w in stored.get("left_out", {}).values())
        )
        if not ok:
            raise self._bad("malformed placement field")
        counts = stored["counts"]  # the manifest sorts keys: back to the session's order
        ordered = {b: counts[b] for b in order if b in counts}
        ordered.update({b: n for b, n in counts.items() if b not in ordered})
        return {**stored, "counts": ordered}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Qpc) and other._data == self._data

    def __hash__(self) -> int:
        return hash(self._data)

    def __repr__(self) -> str:
        info = self.info()
        return f"<Qpc {info.network!r} target={info.target} {self.size} B>"


class QpcFile:
    """A container file as the AIC100 runtime's ``QpcFile`` holds it: a base path and a
    file name (``programqpc.bin`` by default), and its bytes once `load` read them.

    Args:
        base_path: The folder.
        filename: The file's name in it.
    """

    def __init__(
        self, base_path: str | os.PathLike[str], filename: str = DEFAULT_QPC_FILENAME
    ) -> None:
        if not isinstance(filename, str) or not filename or "/" in filename:
            raise XrtError(ErrorCode.WRONG_TYPE, f"QpcFile: bad file name {filename!r}")
        self.path = Path(base_path) / filename
        self._data: bytes | None = None

    def load(self) -> QpcFile:
        """Read the file (``load()``); returns itself.

        Raises:
            XrtError: 11002 for a missing or unreadable file.
        """
        try:
            self._data = self.path.read_bytes()
        except OSError as exc:
            raise XrtError(
                ErrorCode.FILE_NOT_FOUND, f"container {str(self.path)!r}: {exc.strerror}"
            ) from None
        return self

    def get_buffer(self) -> bytes:
        """The file's bytes (``getBuffer()``, ``data()``).

        Raises:
            XrtError: 11012 before `load`.
        """
        if self._data is None:
            raise XrtError(ErrorCode.WRONG_ORDER, f"QpcFile {str(self.path)!r}: load() first")
        return self._data

    data = get_buffer

    @property
    def size(self) -> int:
        """Bytes loaded (``size()``; 11012 before `load`)."""
        return len(self.get_buffer())

    def qpc(self) -> Qpc:
        """The container it holds, read and checked (`Qpc.from_buffer`)."""
        return Qpc.from_buffer(self.get_buffer())

    def __repr__(self) -> str:
        state = f"{len(self._data)} B" if self._data is not None else "not loaded"
        return f"<QpcFile {str(self.path)!r} {state}>"
