"""Tuning records: what was measured for one operator on one hardware, kept in a JSON file.

InfiniTensor's PerfEngine keys a record per operator (``PerfEngine::Key``: op type, shapes,
kernel attributes), tunes when no record exists, stores the record and uses it on later
runs. Ours is the same, with the trust rules a file that outlives the code needs:

* **Key** (`TuningKey`): op type, input / output / parameter dtypes and shapes, the
  operator's attributes, and the hardware: a hash of the target name and every
  `xrt.hw.config.NpuConfig` field (the host: its machine, CPU count and numpy version).
* **Record** (`TuningRecord`): the key, the choice (NPU: one tiling ``[th, n_ob, n_ib,
  order]`` per convolution the tiler plans; host: a kernel variant), the measured cost and
  the default choice's cost measured the same way, what measured it (``rtl`` device
  cycles, ``cost-model`` golden-model cycles, ``host-timer`` seconds), the format version,
  the runtime version, and the fingerprint of the code that turns a choice into a program
  (or kernel) and a cost.
* **Trust** (`TuningRecords.get`): a record is used only when its format version is
  `FORMAT_VERSION`, its code fingerprint is the running code's (a changed tiler, emitter,
  token pass or cost model may make the recorded choice slower, or mean something else:
  the record is stale, and tuning measures again), and its hardware is the one asked
  about (another's is foreign). The runtime version is kept for people, not compared:
  the fingerprint is the finer test. The compiler validates the choice itself
  (`xrt.npu.compiler.plan_conv`): an illegal one gives the default plan. Every record
  passed over leaves a line in `TuningRecords.notes`; none is ever trusted blindly.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import platform
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from xrt._version import runtime_version
from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import NpuConfig

__all__ = [
    "FORMAT_VERSION",
    "MEASURES",
    "TuningKey",
    "TuningRecord",
    "TuningRecords",
    "code_fingerprint",
    "hardware_hash",
    "host_hardware_hash",
    "runtime_version",
]

FORMAT_VERSION = 1
"""Version of the record format; records of another version are stale."""

MEASURES = ("rtl", "cost-model", "host-timer")
"""What a cost can have been measured on: device cycles of the RTL engine, the golden
model's cost-model cycles, or wall seconds of a host kernel."""


def code_fingerprint(modules: Iterable[ModuleType]) -> str:
    """A short hash of the source of `modules` (their names when no source is installed,
    with the runtime version)."""
    h = hashlib.sha256()
    for m in modules:
        try:
            h.update(inspect.getsource(m).encode())
        except (OSError, TypeError):
            h.update(f"{m.__name__}@{runtime_version()}".encode())
    return h.hexdigest()[:16]


def hardware_hash(config: NpuConfig, target: str) -> str:
    """A short hash of an NPU target and every field of its compute engine configuration."""
    text = json.dumps([target, sorted(asdict(config).items())])
    return "npu-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def host_hardware_hash() -> str:
    """A short hash of what host kernel timings depend on: machine, CPUs, numpy."""
    text = json.dumps([platform.machine(), platform.processor(), os.cpu_count(), np.__version__])
    return "host-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=repr)


@dataclass(frozen=True)
class TuningKey:
    """What a measurement depends on (PerfEngine's ``Key``).

    Attributes:
        op_type: The operator type.
        inputs: ``[dtype, [shape]]`` of each input value, in order.
        outputs: The same for each output.
        params: ``[role, dtype, [shape]]`` of each parameter array (not its values).
        attrs: The operator's attributes, as canonical JSON.
        hardware: `hardware_hash` (or `host_hardware_hash`) of what it runs on.
    """

    op_type: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    params: tuple[tuple[str, str, tuple[int, ...]], ...]
    attrs: str
    hardware: str

    @classmethod
    def of(cls, op: Any, graph: Any, hardware: str) -> TuningKey:
        """The key of operator `op` of `graph` (a `Network` or `NetworkView`)."""

        def value(v: str) -> tuple[str, tuple[int, ...]]:
            t = graph.values[v]
            return (t.dtype.manual_name, tuple(int(d) for d in t.shape))

        params = graph.op_params(op)
        return cls(
            op.op_type,
            tuple(value(v) for v in op.inputs),
            tuple(value(v) for v in op.outputs),
            tuple(
                (role, str(params[role].dtype), tuple(int(d) for d in params[role].shape))
                for role in sorted(params)
            ),
            _canonical(op.attrs),
            hardware,
        )

    def identity(self) -> str:
        """A hash of everything but the hardware: the same operator on any hardware."""
        return hashlib.sha256(_canonical(self._fields(False)).encode()).hexdigest()[:24]

    def digest(self) -> str:
        """A hash of the whole key."""
        return hashlib.sha256(_canonical(self._fields(True)).encode()).hexdigest()[:24]

    def _fields(self, hardware: bool) -> list[Any]:
        out: list[Any] = [self.op_type, self.inputs, self.outputs, self.params, self.attrs]
        return [*out, self.hardware] if hardware else out

    def describe(self) -> str:
        """``QConv2d SInt8[1, 64, 56, 56] -> SInt8[1, 64, 56, 56]``."""
        ins = ", ".join(f"{d}{list(s)}" for d, s in self.inputs)
        outs = ", ".join(f"{d}{list(s)}" for d, s in self.outputs)
        return f"{self.op_type} {ins} -> {outs}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "op_type": self.op_type,
            "inputs": [[d, list(s)] for d, s in self.inputs],
            "outputs": [[d, list(s)] for d, s in self.outputs],
            "params": [[r, d, list(s)] for r, d, s in self.params],
            "attrs": self.attrs,
            "hardware": self.hardware,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TuningKey:
        """The inverse of `to_dict`; ValueError, KeyError or TypeError when malformed."""
        return cls(
            str(data["op_type"]),
            tuple((str(d), tuple(int(x) for x in s)) for d, s in data["inputs"]),
            tuple((str(d), tuple(int(x) for x in s)) for d, s in data["outputs"]),
            tuple((str(r), str(d), tuple(int(x) for x in s)) for r, d, s in data["params"]),
            str(data["attrs"]),
            str(data["hardware"]),
        )


@dataclass(frozen=True)
class TuningRecord:
    """One operator's measured best choice (PerfEngine's ``PerfRecord``).

    Attributes:
        key: What it was measured for.
        choice: NPU: ``{"tilings": [[th, n_ob, n_ib, order], ...]}``; host:
            ``{"kernel": NAME}``.
        cost: The choice's measured cost (cycles, or seconds for ``host-timer``).
        default_cost: The default choice's cost, measured the same way.
        measured_on: One of `MEASURES`.
        candidates: How many choices were measured.
        code: `code_fingerprint` of the code that made the choice a program and a cost.
        runtime: The runtime version that measured it (for people).
        format: `FORMAT_VERSION` when it was written.
    """

    key: TuningKey
    choice: dict[str, Any]
    cost: float
    default_cost: float
    measured_on: str
    candidates: int
    code: str
    runtime: str = field(default_factory=runtime_version)
    format: int = FORMAT_VERSION

    @property
    def saved(self) -> float:
        """Cost saved against the default choice (cycles or seconds)."""
        return self.default_cost - self.cost

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "digest": self.key.digest(),
            "key": self.key.to_dict(),
            "choice": self.choice,
            "cost": self.cost,
            "default_cost": self.default_cost,
            "measured_on": self.measured_on,
            "candidates": self.candidates,
            "code": self.code,
            "runtime": self.runtime,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TuningRecord:
        """The inverse of `to_dict`; ValueError when malformed or its digest disagrees."""
        try:
            key = TuningKey.from_dict(data["key"])
            rec = cls(
                key,
                dict(data["choice"]),
                float(data["cost"]),
                float(data["default_cost"]),
                str(data["measured_on"]),
                int(data["candidates"]),
                str(data["code"]),
                str(data["runtime"]),
                int(data["format"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed record: {type(exc).__name__}: {exc}") from None
        if data.get("digest") != key.digest():
            raise ValueError("its digest does not match its key (edited by hand?)")
        if rec.measured_on not in MEASURES:
            raise ValueError(f"measured_on {rec.measured_on!r} is not one of {MEASURES}")
        return rec


class TuningRecords:
    """A set of `TuningRecord` (PerfEngine), saved to and loaded from a JSON file.

    Records of several hardware configurations live side by side (one file for Buyi and
    ZG330); for one hardware, one record per operator key.

    Attributes:
        notes: Why records were passed over (load and `get`), one line each.
        path: The file it was loaded from, if any (`save` writes there by default).
    """

    def __init__(self, records: Iterable[TuningRecord] = (), path: Path | None = None) -> None:
        self._by_id: dict[str, list[TuningRecord]] = {}
        self.notes: list[str] = []
        self.path = path
        for r in records:
            self.put(r)

    # -- file -------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str], missing_ok: bool = True) -> TuningRecords:
        """The records in `path`. A missing file (with `missing_ok`) gives none; an
        unreadable file or record is skipped with a line in `notes`, never raised: the
        records only make compiles faster, so a bad file must not stop one.

        Raises:
            XrtError: 11002 when the file is missing and `missing_ok` is False.
        """
        p = Path(path)
        out = cls(path=p)
        if not p.exists():
            if not missing_ok:
                raise XrtError(ErrorCode.FILE_NOT_FOUND, f"tuning records {str(p)!r} not found")
            return out
        try:
            doc = json.loads(p.read_text())
            entries = doc["records"]
            if not isinstance(entries, list):
                raise TypeError("'records' is not a list")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            out.notes.append(f"{p}: not a tuning records file, ignored ({exc})")
            return out
        if doc.get("format") != FORMAT_VERSION:
            out.notes.append(
                f"{p}: file format {doc.get('format')!r}, this runtime reads {FORMAT_VERSION}"
                "; its records are checked one by one"
            )
        for i, entry in enumerate(entries):
            try:
                rec = TuningRecord.from_dict(entry)
            except ValueError as exc:
                out.notes.append(f"{p}: record {i} ignored: {exc}")
                continue
            out._add(rec)
        return out

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write every record to `path` (default: where they were loaded from), atomically:
        a temporary file in the same folder renamed over it, so a reader never sees half.

        Raises:
            XrtError: 11003 without a path; 11011 when the file cannot be written.
        """
        target = Path(path) if path is not None else self.path
        if target is None:
            raise XrtError(ErrorCode.OUT_OF_RANGE, "TuningRecords.save: no path given")
        doc = {"format": FORMAT_VERSION, "records": [r.to_dict() for r in self]}
        text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise XrtError(
                ErrorCode.LOAD_FAILED, f"cannot write tuning records {str(target)!r}: {exc}"
            ) from None
        self.path = target
        return target

    # -- records ----------------------------------------------------------------------------

    def _add(self, rec: TuningRecord) -> None:
        self._by_id.setdefault(rec.key.identity(), []).append(rec)

    def put(self, rec: TuningRecord) -> None:
        """Add `rec`, replacing any record of the same key (a foreign one stays)."""
        same = self._by_id.setdefault(rec.key.identity(), [])
        same[:] = [r for r in same if r.key != rec.key]
        same.append(rec)

    def get(self, key: TuningKey, code: str) -> TuningRecord | None:
        """The record to trust for `key` with the running code's fingerprint `code`, or None.

        Records of the same operator passed over (other format, other code, other
        hardware) each add a line to `notes`.
        """
        found = None
        for r in self._by_id.get(key.identity(), []):
            if r.key.hardware != key.hardware:
                why = f"foreign: measured on other hardware ({r.key.hardware})"
            elif r.format != FORMAT_VERSION:
                why = f"stale: format {r.format}, this runtime writes {FORMAT_VERSION}"
            elif r.code != code:
                why = (
                    f"stale: made by other code (fingerprint {r.code}, runtime {r.runtime}; "
                    f"now {code})"
                )
            elif r.key != key:
                why = "its key differs"
            else:
                found = r
                continue
            self.note(f"{key.describe()}: record ignored, {why}")
        return found

    def note(self, line: str) -> None:
        """Add a line to `notes` (once)."""
        if line not in self.notes:
            self.notes.append(line)

    def __iter__(self) -> Iterator[TuningRecord]:
        for group in self._by_id.values():
            yield from group

    def __len__(self) -> int:
        return sum(len(g) for g in self._by_id.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TuningRecords):
            return NotImplemented
        return sorted(_canonical(r.to_dict()) for r in self) == sorted(
            _canonical(r.to_dict()) for r in other
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        where = f" from {self.path}" if self.path else ""
        return f"TuningRecords({len(self)} records{where})"


def choice_tilings(rec: TuningRecord) -> Sequence[Any]:
    """The ``tilings`` list of an NPU record's choice; ValueError when it has none."""
    tilings = rec.choice.get("tilings")
    if not isinstance(tilings, list) or not tilings:
        raise ValueError(f"choice {rec.choice!r} has no tilings")
    return tilings
