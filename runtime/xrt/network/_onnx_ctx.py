"""State shared by the ONNX importer's node handlers (`xrt.network.onnx_import`).

Run-time parameters: a handler whose ONNX input is a weight, shape, pad, scale or bound
takes it as a constant when it is one (`const`), else binds the op's role to the value
fed at run time (`fed_param`, `fed_or_const`; see `xrt.network._fed`). Output types that
depend on such data are declared from ONNX shape inference (`declared`, `dyn_type`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network._builder import NetworkBuilder

__all__ = ["ONNX_DTYPES", "Ctx", "onnx_dtype", "require_onnx"]

ONNX_DTYPES: dict[int, DataType] = {
    1: DataType.FP32,
    2: DataType.UINT8,
    3: DataType.SINT8,
    4: DataType.UINT16,
    5: DataType.SINT16,
    6: DataType.SINT32,
    7: DataType.SINT64,
    9: DataType.BOOL,
    10: DataType.FP16,
    11: DataType.FP64,
    12: DataType.UINT32,
    13: DataType.UINT64,
    16: DataType.BF16,
}
"""ONNX ``TensorProto.DataType`` values xrt stores, and their `DataType`."""


def require_onnx() -> Any:
    try:
        import onnx
    except ImportError:  # pragma: no cover - onnx is a dependency of the install
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            "importing ONNX needs the 'onnx' package, a dependency of npu-emu: reinstall it "
            "with its dependencies (pip install npu-emu), or pip install onnx",
        ) from None
    return onnx


def onnx_dtype(onnx: Any, elem_type: int, what: str) -> DataType:
    """The `DataType` of ONNX element type `elem_type`; XrtError 11011 naming it otherwise."""
    dt = ONNX_DTYPES.get(int(elem_type))
    if dt is None:
        name = onnx.TensorProto.DataType.Name(elem_type)
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"{what} is {name}; supported element types: "
            + ", ".join(onnx.TensorProto.DataType.Name(k) for k in ONNX_DTYPES),
        )
    return dt


class Ctx:
    """State of one import: the builder, constants, aliases and per-node helpers."""

    def __init__(self, onnx: Any, model: Any, opset: int, name: str, fold_bn: bool) -> None:
        self.onnx = onnx
        self.opset = opset
        self.fold_bn = fold_bn
        self.b = NetworkBuilder(name)
        self.consts: dict[str, np.ndarray] = {}
        self.alias: dict[str, str] = {}
        self.materialized: dict[str, str] = {}
        self.uses: dict[str, int] = {}
        self.consumers: dict[str, list[Any]] = {}
        self.done: set[str] = set()
        """Outputs of nodes a handler already imported together with an earlier node."""
        self.onnx_types: dict[str, TensorType] = {}
        """ONNX shape inference's type of each tensor whose rank it knows (-1: unknown)."""
        self.empty: set[str] = set()
        """Zero-size graph inputs (constant: they hold no data) -> why they cannot be data."""
        for node in model.graph.node:
            for v in node.input:
                if v:
                    self.uses[v] = self.uses.get(v, 0) + 1
                    self.consumers.setdefault(v, []).append(node)
        for o in model.graph.output:
            self.uses[o.name] = self.uses.get(o.name, 0) + 1
        self.node: Any = None

    # -- values ---------------------------------------------------------------------

    def fail(self, message: str) -> XrtError:
        node = self.node
        where = f"node {node.name!r} ({node.op_type})" if node is not None else "model"
        return XrtError(ErrorCode.LOAD_FAILED, f"ONNX {where}: {message}")

    def const(self, name: str) -> np.ndarray | None:
        """The constant value of ONNX tensor `name`, or None when it is computed at run time."""
        if not name:
            return None
        if name in self.empty:  # a zero-size input holds no data: its value is known
            return np.zeros(self.b.values[name].shape, self.b.values[name].dtype.numpy)
        return self.consts.get(name)

    def need_const(self, name: str, what: str) -> np.ndarray:
        value = self.const(name)
        if value is None:
            raise self.fail(f"{what} ({name!r}) must be a constant (initializer or foldable)")
        return value

    def input(self, index: int) -> str:
        """The node's input `index`, or "" when it is absent."""
        return self.node.input[index] if len(self.node.input) > index else ""

    def const_input(self, index: int, what: str) -> np.ndarray | None:
        """The constant value of optional input `index` (None when absent)."""
        name = self.input(index)
        return self.need_const(name, what) if name else None

    def value(self, name: str) -> str:
        """Our value name for ONNX tensor `name`; a constant becomes a Constant op."""
        if name in self.empty and name not in self.consts:
            # A zero-size tensor has one possible value: it is a constant (fed or not).
            self.consts[name] = self.const(name)  # type: ignore[assignment]
        if name in self.alias:
            return self.alias[name]
        if name in self.consts:
            if name not in self.materialized:
                arr = self.consts[name]
                pname = self.b.param(name, arr, unique=True)
                (out,) = self.b.add(
                    "Constant",
                    [],
                    params={"value": pname},
                    name=name,
                    outputs=[self.b.unique(name)],
                )
                self.materialized[name] = out
            return self.materialized[name]
        if name not in self.b.values:
            raise self.fail(f"input {name!r} is not produced by any earlier node")
        return name

    def type(self, name: str) -> TensorType:
        return self.b.values[self.value(name)]

    def static_shape(self, value: str) -> tuple[int, ...]:
        """The shape of our value `value`; XrtError naming it when it is known only at run
        time (it depends on data fed at run time) and the handler needs it."""
        t = self.b.values[value]
        if not t.is_static:
            raise self.fail(
                f"input {value!r} has a shape known only at run time {list(t.shape)} (it "
                "depends on data fed at run time); this operator needs it static"
            )
        return t.shape

    # -- run-time parameters --------------------------------------------------------------

    def fed_or_const(self, index: int) -> np.ndarray | str | None:
        """Input `index`: its constant array, else our value fed at run time, else None."""
        name = self.input(index)
        if not name:
            return None
        arr = self.const(name)
        return arr if arr is not None else self.value(name)

    def fed_param(
        self,
        index: int,
        role: str,
        params: dict[str, np.ndarray],
        fed: dict[str, str],
        convert: Any = None,
    ) -> None:
        """Put input `index` in `params` (a constant, through `convert`) or `fed` (a value
        fed at run time) under `role`; nothing when the input is absent."""
        got = self.fed_or_const(index)
        if isinstance(got, str):
            fed[role] = got
        elif got is not None:
            params[role] = convert(got) if convert is not None else got

    def fed_length(self, value: str, want: int | None = None, what: str = "") -> int:
        """How many entries the fed 1-D list `value` (axes, a shape, pads) has: its static
        length, which must be `want` when given."""
        t = self.b.values[value]
        if t.ndim != 1 or (want is not None and t.shape[0] != want):
            need = f"shape [{want}]" if want is not None else "1-D"
            raise self.fail(
                f"{what or repr(value)} fed at run time must be {need}, got {list(t.shape)}"
            )
        return t.shape[0]

    def declared(self, name: str) -> TensorType | None:
        """ONNX shape inference's type of tensor `name` (-1 for unknown dims), or None."""
        return self.onnx_types.get(name)

    def dyn_type(self, name: str, dtype: Any, dims: Sequence[int]) -> TensorType:
        """The declared type of output `name` of a dynamic op: `dims` (-1: known only at
        run time), with the dimensions ONNX shape inference knows when it agrees on the
        element type and rank."""
        t = self.onnx_types.get(name)
        if t is not None and t.dtype is dtype and t.ndim == len(dims):
            dims = [o if o >= 0 else d for o, d in zip(t.shape, dims, strict=True)]
        return TensorType(dtype, dims)

    def attrs(self) -> dict[str, Any]:
        out = {}
        for a in self.node.attribute:
            v = self.onnx.helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode()
            out[a.name] = v
        return out

    def emit(
        self,
        op_type: str,
        inputs: Sequence[str],
        attrs: Mapping[str, Any] | None = None,
        params: Mapping[str, np.ndarray] | None = None,
        *,
        output: str | None = None,
        outputs: Sequence[str] | None = None,
        fed: Mapping[str, str] | None = None,
        types: Sequence[TensorType] | None = None,
    ) -> str:
        """Add one op; `params` are arrays (named after the node), `fed` roles bound to
        values fed at run time. A dynamic op's output types are `types`, else ONNX's
        (when it knows them all). Returns the output name."""
        refs = {}
        base = self.node.name or self.node.output[0]
        for role, arr in (params or {}).items():
            refs[role] = self.b.param(f"{base}.{role}", np.asarray(arr, order="C"), unique=True)
        if outputs is None:
            outputs = [
                output if output is not None else self.b.unique(f"{self.node.output[0]}:{op_type}")
            ]
        if types is None:
            known = [self.onnx_types.get(o) for o in outputs]
            types = known if all(t is not None for t in known) else None  # type: ignore[assignment]
        res = self.b.add(
            op_type, inputs, attrs, refs, outputs=outputs, name=self.node.name, fed=fed, types=types
        )
        return res[0]

    def const_value(self, arr: np.ndarray, role: str) -> str:
        """A Constant op holding `arr`, named after the node and `role`."""
        base = f"{self.node.name or self.node.output[0]}.{role}"
        pname = self.b.param(base, np.asarray(arr), unique=True)
        (out,) = self.b.add(
            "Constant",
            [],
            params={"value": pname},
            outputs=[self.b.unique(base)],
            name=self.node.name,
        )
        return out

    def finish(self, value: str) -> None:
        """Give the node's first output name to `value`, made by the op just added."""
        prod = self.b.producer(value)
        if prod is None or prod is not self.b.ops[-1]:
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL, f"importer: {value!r} is not the last op's output"
            )
        self.b.rewrite(prod.op_id, outputs=(self.node.output[0],))
