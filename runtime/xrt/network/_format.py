"""The network file format: one JSON document and one raw parameter file.

See docs/network-format.md for the specification. Loading validates everything and turns
every problem into XrtError 11011 naming it (11002 for a missing file). `save_network` and
`load_network` are also `Network.save` and `Network.load`, attached at the end of this
module (see the note in `Network`).
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network._graph import Network
from xrt.network._operator import Operator
from xrt.ops import BOUNDARY_OP_TYPES
from xrt.ops.boundary import INPUT_OP, OUTPUT_OP

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "PARAM_ALIGNMENT", "load_network", "save_network"]

FORMAT_NAME = "xrt-network"
"""The ``format`` field of every network file."""
FORMAT_VERSION = 3
"""The version this code writes, and the newest it reads. Version 2 added run-time
parameters (an op's ``fed`` roles, -1 dimensions); version 3 stores the ``Input`` op (id 0)
and the ``Output`` op (the last id) of every network. Version 1 and 2 files are migrated
on load (`_migrate`): they get both ops, their op ids shifted by one first when an op had
id 0."""
_FED_VERSION = 2
_BOUNDARY_VERSION = 3
PARAM_ALIGNMENT = 64
"""Each parameter starts at a multiple of this many bytes in the raw file."""

_TOP_KEYS = {
    "format",
    "version",
    "name",
    "raw",
    "inputs",
    "outputs",
    "values",
    "params",
    "ops",
    "checksum",
}


def _canonical(doc: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in doc.items() if k != "checksum"}
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode()


def _checksum(doc: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(doc)).hexdigest()


def _quant_to_json(q: QuantParams | None) -> dict[str, Any] | None:
    if q is None:
        return None
    return {"scale": list(q.scale), "zero_point": list(q.zero_point), "axis": q.axis}


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def save_network(
    network: Network,
    json_path: str | os.PathLike[str],
    raw_path: str | os.PathLike[str] | None = None,
) -> None:
    """Write `network` as JSON + raw parameters (docs/network-format.md).

    Args:
        network: The network.
        json_path: JSON destination.
        raw_path: Parameter destination; default: `json_path` with suffix ``.raw``.
    """
    jpath = Path(json_path)
    rpath = Path(raw_path) if raw_path is not None else jpath.with_suffix(".raw")
    blob = bytearray()
    params: dict[str, Any] = {}
    for name, arr in network.params.items():
        dtype = DataType.from_numpy(arr.dtype)
        data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
        pad = (-len(blob)) % PARAM_ALIGNMENT
        blob.extend(b"\0" * pad)
        params[name] = {
            "dtype": dtype.manual_name,
            "shape": list(arr.shape),
            "offset": len(blob),
            "nbytes": len(data),
            "crc32": zlib.crc32(data),
        }
        blob.extend(data)
    doc: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": network.name,
        "raw": {"file": rpath.name, "nbytes": len(blob), "alignment": PARAM_ALIGNMENT},
        "inputs": list(network.inputs),
        "outputs": list(network.outputs),
        "values": {
            n: {
                "dtype": t.dtype.manual_name,
                "shape": list(t.shape),
                "layout": t.layout,
                "quant": _quant_to_json(t.quant),
            }
            for n, t in network.values.items()
        },
        "params": params,
        "ops": [_op_to_json(op) for op in network.ops],
    }
    doc["checksum"] = _checksum(doc)
    try:
        text = _dump_readable(doc)
    except (TypeError, ValueError) as exc:
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"network {network.name!r} is not serialisable: {exc}"
        ) from exc
    _write_atomic(rpath, bytes(blob))
    _write_atomic(jpath, text.encode())


def _op_to_json(op: Operator) -> dict[str, Any]:
    out = {
        "id": op.op_id,
        "type": op.op_type,
        "name": op.name,
        "inputs": list(op.inputs),
        "outputs": list(op.outputs),
        "attrs": dict(op.attrs),
        "params": dict(op.params),
    }
    if op.fed:
        out["fed"] = dict(op.fed)
    return out


def _dump_readable(doc: Mapping[str, Any]) -> str:
    """JSON with one line per value, parameter and op (diff-friendly, still plain JSON)."""

    def one(v: Any) -> str:
        return json.dumps(v, allow_nan=False, separators=(", ", ": "))

    lines = ["{"]
    items = list(doc.items())
    for i, (key, val) in enumerate(items):
        end = "," if i < len(items) - 1 else ""
        if key in ("values", "params") and val:
            lines.append(f" {one(key)}: {{")
            sub = list(val.items())
            for j, (k, v) in enumerate(sub):
                lines.append(f"  {one(k)}: {one(v)}{',' if j < len(sub) - 1 else ''}")
            lines.append(f" }}{end}")
        elif key == "ops" and val:
            lines.append(f" {one(key)}: [")
            for j, v in enumerate(val):
                lines.append(f"  {one(v)}{',' if j < len(val) - 1 else ''}")
            lines.append(f" ]{end}")
        else:
            lines.append(f" {one(key)}: {one(val)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


class _BadError(Exception):
    """A validation failure inside load; turned into XrtError 11011 with the file name."""


def _get(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict):
        raise _BadError(f"{where} must be an object")
    if key not in obj:
        raise _BadError(f"{where} lacks {key!r}")
    value = obj[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise _BadError(f"{where}.{key} must be {_kind_name(kind)}, got {value!r}")
    if not isinstance(value, kind):
        raise _BadError(f"{where}.{key} must be {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        int: "an integer",
        float: "a number",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _str_list(obj: Any, key: str, where: str) -> list[str]:
    items = _get(obj, key, list, where)
    if not all(isinstance(s, str) for s in items):
        raise _BadError(f"{where}.{key} must list strings")
    return items


def _int_list(items: Any, where: str) -> list[int]:
    if not isinstance(items, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in items
    ):
        raise _BadError(f"{where} must be a list of integers")
    return items


def _parse_quant(q: Any, where: str) -> QuantParams | None:
    if q is None:
        return None
    scale = _get(q, "scale", list, where)
    zp = _int_list(_get(q, "zero_point", list, where), f"{where}.zero_point")
    axis = q.get("axis")
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int)):
        raise _BadError(f"{where}.axis must be an integer or null")
    if not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scale):
        raise _BadError(f"{where}.scale must list numbers")
    try:
        return QuantParams(scale, zp, axis)
    except XrtError as exc:
        raise _BadError(f"{where}: {exc.message}") from None


def _parse_value(name: str, v: Any) -> TensorType:
    where = f"values[{name!r}]"
    dtype = _get(v, "dtype", str, where)
    shape = _int_list(_get(v, "shape", list, where), f"{where}.shape")
    layout = v.get("layout", "*")
    if not isinstance(layout, str):
        raise _BadError(f"{where}.layout must be a string")
    try:
        return TensorType(dtype, shape, layout, _parse_quant(v.get("quant"), f"{where}.quant"))
    except XrtError as exc:
        raise _BadError(f"{where}: {exc.message}") from None


def _parse_param(name: str, p: Any, raw: memoryview) -> np.ndarray:
    where = f"params[{name!r}]"
    try:
        dtype = DataType.parse(_get(p, "dtype", str, where))
    except XrtError as exc:
        raise _BadError(f"{where}: {exc.message}") from None
    shape = _int_list(_get(p, "shape", list, where), f"{where}.shape")
    if any(d < 0 for d in shape):
        raise _BadError(f"{where}.shape has a negative dimension: {shape}")
    offset = _get(p, "offset", int, where)
    nbytes = _get(p, "nbytes", int, where)
    crc = _get(p, "crc32", int, where)
    count = 1
    for d in shape:
        count *= d
    if nbytes != count * dtype.itemsize:
        raise _BadError(
            f"{where}: nbytes {nbytes} does not match {dtype.manual_name} x {shape} = "
            f"{count * dtype.itemsize}"
        )
    if offset < 0 or offset + nbytes > len(raw):
        raise _BadError(
            f"{where}: bytes [{offset}, {offset + nbytes}) lie outside the raw file "
            f"({len(raw)} bytes)"
        )
    chunk = raw[offset : offset + nbytes]
    if zlib.crc32(chunk) != crc:
        raise _BadError(
            f"{where}: CRC32 mismatch (the raw file is corrupt or belongs to another network)"
        )
    try:
        arr = np.frombuffer(chunk, dtype=dtype.numpy.newbyteorder("<")).reshape(shape)
        return arr.astype(dtype.numpy, copy=True)
    except (ValueError, MemoryError, OverflowError) as exc:  # a shape numpy cannot hold
        raise _BadError(f"{where}: shape {shape} cannot be held: {exc}") from None


def _parse_op(i: int, o: Any, version: int) -> Operator:
    where = f"ops[{i}]"
    op_id = _get(o, "id", int, where)
    op_type = _get(o, "type", str, where)
    name = o.get("name", "")
    if not isinstance(name, str):
        raise _BadError(f"{where}.name must be a string")
    inputs = _str_list(o, "inputs", where)
    outputs = _str_list(o, "outputs", where)
    attrs = o.get("attrs", {})
    params = o.get("params", {})
    if not isinstance(attrs, dict):
        raise _BadError(f"{where}.attrs must be an object")
    if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
        raise _BadError(f"{where}.params must map roles to parameter names")
    fed = o.get("fed", {})
    if not isinstance(fed, dict) or not all(isinstance(v, str) for v in fed.values()):
        raise _BadError(f"{where}.fed must map roles to value names")
    if fed and version < _FED_VERSION:
        raise _BadError(f"{where}.fed needs format version {_FED_VERSION}, the file is {version}")
    return Operator(op_id, op_type, tuple(inputs), tuple(outputs), attrs, params, name, fed)


def _migrate(
    ops: list[Operator], inputs: list[str], outputs: list[str], version: int
) -> list[Operator]:
    """The operators of a version 1 or 2 file in version 3's numbering: when an op has id 0,
    every id (and a HardOp's ``op_ids``, which name ops in the same numbering) moves up by
    one; then the Input op (id 0) goes first and the Output op (the next id) last."""
    for i, op in enumerate(ops):
        if op.op_type in BOUNDARY_OP_TYPES:
            raise _BadError(
                f"ops[{i}] is an {op.op_type} op, which a version {version} file cannot hold "
                f"(version {_BOUNDARY_VERSION} stores them)"
            )
    if any(op.op_id == 0 for op in ops):
        ops = [_shifted(op) for op in ops]
    last = ops[-1].op_id if ops else 0
    return [
        Operator(0, INPUT_OP, (), tuple(inputs)),
        *ops,
        Operator(last + 1, OUTPUT_OP, tuple(outputs), ()),
    ]


def _shifted(op: Operator) -> Operator:
    attrs = dict(op.attrs)
    ids = attrs.get("op_ids")
    if op.op_type == "HardOp" and isinstance(ids, list):
        attrs["op_ids"] = [
            i + 1 if isinstance(i, int) and not isinstance(i, bool) else i for i in ids
        ]
    return op.replace(op_id=op.op_id + 1, attrs=attrs)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"{what} {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise XrtError(
            ErrorCode.FILE_NOT_FOUND, f"{what} {str(path)!r} is a directory, not a file"
        ) from None
    except OSError as exc:
        raise XrtError(ErrorCode.LOAD_FAILED, f"cannot read {what} {str(path)!r}: {exc}") from None


def _reject_constant(token: str) -> Any:
    raise _BadError(f"the JSON holds {token}, which is not a valid number here")


def load_network(
    json_path: str | os.PathLike[str],
    raw_path: str | os.PathLike[str] | None = None,
    *,
    verify_checksum: bool = True,
) -> Network:
    """Read a network written by `save_network` and validate all of it.

    Args:
        json_path: The JSON file.
        raw_path: The parameter file; default: the ``raw.file`` named in the JSON, next to it.
        verify_checksum: Check the JSON's own SHA-256 (turn off only to load a JSON file
            edited by hand; everything else is still validated).

    Returns:
        The validated `Network`.

    Raises:
        XrtError: 11002 when a file is missing; 11011 naming what is wrong for anything
            corrupt, truncated or inconsistent.
    """
    jpath = Path(json_path)
    text = _read(jpath, "network file")
    try:
        try:
            doc = json.loads(text.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError as exc:
            raise _BadError(f"not UTF-8 text: {exc}") from None
        except json.JSONDecodeError as exc:
            raise _BadError(f"not valid JSON: {exc}") from None
        except RecursionError:
            raise _BadError("JSON is nested too deeply") from None
        if not isinstance(doc, dict):
            raise _BadError("the document must be a JSON object")
        fmt = doc.get("format")
        if fmt != FORMAT_NAME:
            raise _BadError(f"format is {fmt!r}, expected {FORMAT_NAME!r}")
        version = _get(doc, "version", int, "document")
        if version > FORMAT_VERSION:
            raise _BadError(
                f"version {version} is newer than this xrt reads ({FORMAT_VERSION}); upgrade xrt"
            )
        if version < 1:
            raise _BadError(f"version {version} is not a valid format version")
        unknown = sorted(set(doc) - _TOP_KEYS)
        if unknown:
            raise _BadError(f"unknown top-level key(s) {unknown}")
        if verify_checksum:
            stored = _get(doc, "checksum", str, "document")
            try:
                actual = _checksum(doc)
            except (TypeError, ValueError) as exc:
                raise _BadError(f"cannot checksum the document: {exc}") from None
            if stored != actual:
                raise _BadError("checksum mismatch: the JSON was modified or is corrupt")
        name = _get(doc, "name", str, "document")
        raw_info = _get(doc, "raw", dict, "document")
        raw_size = _get(raw_info, "nbytes", int, "raw")
        raw_file = _get(raw_info, "file", str, "raw")
        if raw_path is None:
            if not raw_file or Path(raw_file).name != raw_file:
                raise _BadError(f"raw.file {raw_file!r} must be a plain file name")
            rpath = jpath.with_name(raw_file)
        else:
            rpath = Path(raw_path)
    except _BadError as exc:
        raise XrtError(ErrorCode.LOAD_FAILED, f"network file {str(jpath)!r}: {exc}") from None
    raw = memoryview(_read(rpath, "parameter file"))
    try:
        if len(raw) != raw_size:
            raise _BadError(
                f"parameter file {str(rpath)!r} has {len(raw)} bytes, the network expects "
                f"{raw_size} (truncated or wrong file?)"
            )
        values_doc = _get(doc, "values", dict, "document")
        values = {n: _parse_value(n, v) for n, v in values_doc.items()}
        params_doc = _get(doc, "params", dict, "document")
        params = {n: _parse_param(n, p, raw) for n, p in params_doc.items()}
        ops_doc = _get(doc, "ops", list, "document")
        ops = [_parse_op(i, o, version) for i, o in enumerate(ops_doc)]
        inputs = _str_list(doc, "inputs", "document")
        outputs = _str_list(doc, "outputs", "document")
        if version < _BOUNDARY_VERSION:
            ops = _migrate(ops, inputs, outputs, version)
        try:
            return Network(ops, values, inputs, outputs, params, name)
        except XrtError as exc:
            raise _BadError(exc.message) from None
    except _BadError as exc:
        raise XrtError(ErrorCode.LOAD_FAILED, f"network file {str(jpath)!r}: {exc}") from None


def _network_save(
    self: Network, json_path: str | os.PathLike[str], raw_path: str | os.PathLike[str] | None = None
) -> None:
    """Write the network file (JSON) and its parameter file (raw); see docs/network-format.md.

    Args:
        json_path: Where the JSON goes.
        raw_path: Where the parameters go; default: `json_path` with suffix ``.raw``.
    """
    save_network(self, json_path, raw_path)


def _network_load(
    cls: type[Network],
    json_path: str | os.PathLike[str],
    raw_path: str | os.PathLike[str] | None = None,
    *,
    verify_checksum: bool = True,
) -> Network:
    """Read a network written by `save` and validate all of it; see `load_network`."""
    return load_network(json_path, raw_path, verify_checksum=verify_checksum)


Network.save = _network_save  # type: ignore[method-assign]
Network.load = classmethod(_network_load)  # type: ignore[method-assign,assignment]
