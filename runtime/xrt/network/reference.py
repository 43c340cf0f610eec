"""The reference executor: run a network or a view op by op with the numpy host kernels.

This is the numerical reference the later Session/HostBackend and the NPU backends are
checked against. It is sequential and simple on purpose; values are freed after their
last use unless all of them are asked for. The ``Input`` and ``Output`` ops compute
nothing: the Input op yields the feeds, the Output op the outputs (`xrt.ops.boundary`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from xrt.errors import ErrorCode, XrtError
from xrt.network._fed import FedResolver, bind_fed, concrete, needs_resolution
from xrt.network._graph import Network, NetworkView
from xrt.network._operator import Operator
from xrt.ops import is_boundary

__all__ = ["check_inputs", "run_network_reference"]

Observer = Callable[[Operator, list[np.ndarray]], None]


def check_inputs(
    graph: Network | NetworkView, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Match `inputs` to ``graph.inputs`` and check each one's dtype and shape.

    Args:
        graph: The network or view to be run.
        inputs: Arrays in ``graph.inputs`` order, or a mapping from input name to array.

    Returns:
        Input name -> array.

    Raises:
        XrtError: 11003 for a wrong count, an unknown or missing name, or a wrong shape;
            11010 for something that is not a numpy array or has the wrong dtype.
    """
    names = list(graph.inputs)
    if isinstance(inputs, Mapping):
        unknown = [k for k in inputs if k not in graph.values or k not in names]
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{graph.name}: inputs are {names}; unknown {unknown}, missing {missing}",
            )
        feed = {n: inputs[n] for n in names}
    else:
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"{graph.name}: inputs must be a list or a dict of arrays"
            )
        if len(inputs) != len(names):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{graph.name}: expects {len(names)} input(s) {names}, got {len(inputs)}",
            )
        feed = dict(zip(names, inputs, strict=True))
    for n, arr in feed.items():
        want = graph.values[n]
        if not isinstance(arr, np.ndarray):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"input {n!r} must be a numpy array, got {type(arr).__name__}"
            )
        if arr.dtype != want.dtype.numpy:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"input {n!r} must be {want.dtype.manual_name} ({want.dtype.numpy}), got "
                f"{arr.dtype}",
            )
        if arr.shape != want.shape:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"input {n!r} must have shape {list(want.shape)}, got {list(arr.shape)}",
            )
    return feed


def run_network_reference(
    graph: Network | NetworkView,
    inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
    *,
    return_all: bool = False,
    observer: Observer | None = None,
) -> list[np.ndarray] | dict[str, np.ndarray]:
    """Run `graph` sequentially with the host kernels.

    Args:
        graph: A `Network` or a `NetworkView` (then `inputs` are the view's inputs).
        inputs: Arrays in ``graph.inputs`` order, or a mapping by name (see `check_inputs`).
        return_all: Return every value (inputs included) by name instead of the outputs.
        observer: Called as ``observer(op, outputs)`` after each op (calibration, debugging);
            the Input op's outputs are the feeds, the Output op has none.

    Returns:
        The outputs in ``graph.outputs`` order, or all values by name with `return_all`.

    Raises:
        XrtError: 11003/11010 for bad inputs (see `check_inputs`); 11013 when a kernel returns
            something other than the declared output types, or raises an unexpected error.
    """
    env: dict[str, np.ndarray] = dict(check_inputs(graph, inputs))
    last_use: dict[str, int] = {}
    if not return_all:
        for i, op in enumerate(graph.ops):
            for v in op.inputs:
                last_use[v] = i
        for v in graph.outputs:
            last_use[v] = len(graph.ops)
    resolver = FedResolver(graph.values, graph.params, graph.ops)
    runtime = {op.op_id for op in graph.ops if op.fed or graph.is_dynamic(op)}
    for i, op in enumerate(graph.ops):
        if is_boundary(op):  # pass-through: the feeds are in env, the outputs stay there
            if observer is not None:
                observer(op, [env[v] for v in op.outputs])
            continue
        op_def = op.op_def
        args = [env[v] for v in op.data_inputs]
        params = graph.op_params(op)
        declared = [graph.values[v] for v in op.outputs]
        kernel_op = op
        if op.op_id in runtime:
            # Run-time parameters: bind the fed arrays, resolve the output types.
            arrays = {role: env[v] for role, v in op.fed.items()}
            if needs_resolution(op, graph.values):
                types = [
                    concrete(graph.values[v], a.shape)
                    for v, a in zip(op.data_inputs, args, strict=True)
                ]
                kernel_op, declared = resolver.resolve(op, types, arrays)
            _, params = bind_fed(op, arrays, params)
        try:
            outs = op_def.forward(kernel_op, args, params)
        except XrtError:
            raise
        except (ValueError, TypeError, IndexError, FloatingPointError, MemoryError) as exc:
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL, f"{op.describe()}: host kernel failed: {exc}"
            ) from exc
        if len(outs) != len(op.outputs):
            raise XrtError(
                ErrorCode.BACKEND_INTERNAL, f"{op.describe()}: kernel returned {len(outs)} outputs"
            )
        outs = [np.asarray(a) if isinstance(a, np.generic) else a for a in outs]
        for v, arr, want in zip(op.outputs, outs, declared, strict=True):
            if arr.dtype != want.dtype.numpy or arr.shape != want.shape:
                raise XrtError(
                    ErrorCode.BACKEND_INTERNAL,
                    f"{op.describe()}: kernel produced {arr.dtype}{list(arr.shape)} for {v!r}, "
                    f"declared {want}",
                )
            env[v] = arr
        if observer is not None:
            observer(op, outs)
        if not return_all:
            for v in set(op.inputs) | set(op.outputs):
                if last_use.get(v, -1) <= i:
                    env.pop(v, None)
    if return_all:
        return env
    return [env[v] for v in graph.outputs]
