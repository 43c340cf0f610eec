"""What `Session.forward` checks in its inputs and in caller-placed output tensors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.tensor import Tensor

__all__ = ["InputLike", "check_inputs", "check_outputs"]

InputLike = Tensor | np.ndarray
"""A forward input: a `Tensor` or a numpy array of the input's exact dtype and shape."""


def check_inputs(
    where: str,
    input_names: Sequence[str],
    values: Mapping[str, TensorType],
    inputs: Sequence[InputLike] | Mapping[str, InputLike],
) -> dict[str, InputLike]:
    """The inputs of a run by name, each checked against its value's type: a list in the
    order of `input_names` or a dict by name; Tensors (with data, matching quantization)
    or numpy arrays of the exact dtype and shape.

    Raises:
        XrtError: 11010 for a wrong type, dtype or quantization; 11003 for a wrong count,
            name or shape; 11012 for a Tensor without data.
    """
    names = list(input_names)
    if isinstance(inputs, Mapping):
        unknown = [k for k in inputs if k not in names]
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{where}: inputs are {names}; unknown {unknown}, missing {missing}",
            )
        feed = {n: inputs[n] for n in names}
    elif isinstance(inputs, list | tuple):
        if len(inputs) != len(names):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{where}: expects {len(names)} input(s) {names}, got {len(inputs)}",
            )
        feed = dict(zip(names, inputs, strict=True))
    else:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"{where}: inputs must be a list or a dict of Tensors or numpy arrays, "
            f"got {type(inputs).__name__}",
        )
    for n, x in feed.items():
        want = values[n]
        if isinstance(x, Tensor):
            dtype, shape = x.dtype.numpy, x.shape
            if x.quant is not None and want.quant is not None and x.quant != want.quant:
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"input {n!r}: quantization {x.quant} differs from the network's {want.quant}",
                )
            if not x.has_data():
                raise XrtError(ErrorCode.WRONG_ORDER, f"input {n!r}: {x!r} has no data")
        elif isinstance(x, np.ndarray):
            dtype, shape = x.dtype, x.shape
        else:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"input {n!r} must be a Tensor or a numpy array, got {type(x).__name__}",
            )
        if dtype != want.dtype.numpy:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"input {n!r} must be {want.dtype.manual_name} ({want.dtype.numpy}), got {dtype}",
            )
        if tuple(shape) != want.shape:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"input {n!r} must have shape {list(want.shape)}, got {list(shape)}",
            )
    return feed


def check_outputs(
    where: str,
    output_names: Sequence[str],
    values: Mapping[str, TensorType],
    outputs: Sequence[Tensor],
) -> list[Tensor]:
    """Caller-placed output tensors, checked against the outputs' types (one Tensor with
    memory per output, in order, of the exact dtype and shape).

    Raises:
        XrtError: 11010 for a wrong type or dtype; 11003 for a wrong count or shape; 11012
            for a tensor without memory.
    """
    if not isinstance(outputs, list | tuple):
        raise XrtError(ErrorCode.WRONG_TYPE, "outputs must be a list of Tensors")
    if len(outputs) != len(output_names):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{where}: has {len(output_names)} output(s) {list(output_names)}, "
            f"got {len(outputs)} output tensor(s)",
        )
    for name, t in zip(output_names, outputs, strict=True):
        want = values[name]
        if not want.is_static:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"output {name!r} has a shape known only at run time {list(want.shape)}: "
                "call forward(inputs), which allocates it",
            )
        if not isinstance(t, Tensor):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"output {name!r}: not a Tensor: {type(t).__name__}"
            )
        if t.dtype is not want.dtype:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"output {name!r} is {want.dtype.manual_name}, the tensor is {t.dtype.manual_name}",
            )
        if t.shape != want.shape:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"output {name!r} has shape {list(want.shape)}, the tensor {list(t.shape)}",
            )
        if not t.has_data():
            raise XrtError(ErrorCode.WRONG_ORDER, f"output {name!r}: the tensor has no memory")
    return list(outputs)
