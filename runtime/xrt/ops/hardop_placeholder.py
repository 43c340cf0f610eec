"""``HardOp``: a placeholder for a run of operators compiled into one NPU program.

`xrt.backend.npu.to_hardop` makes one (the program goes into the ``program`` parameter, the
ops it replaces into ``op_ids``) and `BuyiBackend` / `ZG330Backend` run it. The op declares
its output types itself, because nothing on the host can infer them from a program; the host
has no kernel for it and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.ops._common import desc, fail
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["hardop_forward", "output_type_from_json", "output_type_to_json"]


def output_type_to_json(t: TensorType) -> dict[str, Any]:
    """The JSON form of a HardOp output type: dtype, shape, optional per-tensor scale."""
    out: dict[str, Any] = {"dtype": t.dtype.manual_name, "shape": list(t.shape)}
    if t.quant is not None:
        out["scale"] = t.quant.scale[0]
    return out


def output_type_from_json(op: OpLike, item: Any) -> TensorType:
    """Parse one entry of ``output_types``; XrtError 11010 naming `op` when malformed."""
    if not isinstance(item, dict) or not isinstance(item.get("shape"), list):
        raise fail(
            op, f"output type must be {{dtype, shape[, scale]}}, got {item!r}", ErrorCode.WRONG_TYPE
        )
    try:
        scale = item.get("scale")
        quant = QuantParams(scale) if scale is not None else None
        return TensorType(DataType.parse(item.get("dtype", "")), item["shape"], "*", quant)
    except XrtError as exc:
        raise fail(op, f"bad output type {item!r}: {exc.message}", ErrorCode.WRONG_TYPE) from None


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    types = op.attrs["output_types"]
    if not isinstance(types, list) or len(types) != len(op.outputs):
        raise fail(op, f"output_types must list one type per output ({len(op.outputs)})")
    return [output_type_from_json(op, t) for t in types]


def hardop_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """No host kernel: raises XrtError 11013 naming the op and its target backend."""
    raise XrtError(
        ErrorCode.BACKEND_INTERNAL,
        f"{desc(op)} is an NPU program for target {op.attrs['target']!r}; the host cannot run it",
    )


register_op(
    OpDef(
        "HardOp",
        (0, None),
        None,
        {
            "target": AttrSpec("str", doc="backend the program is for (buyi, zg330)"),
            "output_types": AttrSpec("json", doc="[{dtype, shape[, scale]}, ...] per output"),
            "op_ids": AttrSpec("ints", [], None, "ids of the operators this program replaces"),
        },
        _infer,
        hardop_forward,
        optional_params=("program",),
        doc="placeholder for an NPU program (filled by later backends)",
    )
)
