"""State shared by the ONNX importer's node handlers (`xrt.network.onnx_import`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network._graph import NetworkBuilder

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
    12: DataType.UINT32,
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


def host_array(arr: np.ndarray) -> np.ndarray:
    """A constant as xrt stores it: float64 becomes float32 (xrt has no FP64)."""
    arr = np.asarray(arr)
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    return arr


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
        if name in self.alias:
            return self.alias[name]
        if name in self.consts:
            if name not in self.materialized:
                arr = host_array(self.consts[name])
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
    ) -> str:
        """Add one op; `params` are arrays (named after the node). Returns the output name."""
        refs = {}
        base = self.node.name or self.node.output[0]
        for role, arr in (params or {}).items():
            refs[role] = self.b.param(f"{base}.{role}", np.asarray(arr, order="C"), unique=True)
        if outputs is None:
            outputs = [
                output if output is not None else self.b.unique(f"{self.node.output[0]}:{op_type}")
            ]
        res = self.b.add(op_type, inputs, attrs, refs, outputs=outputs, name=self.node.name)
        return res[0]

    def const_value(self, arr: np.ndarray, role: str) -> str:
        """A Constant op holding `arr`, named after the node and `role`."""
        base = f"{self.node.name or self.node.output[0]}.{role}"
        pname = self.b.param(base, host_array(arr), unique=True)
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
