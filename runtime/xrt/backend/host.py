"""`HostBackend`: every operator of `xrt.ops` on the host CPU, with the numpy kernels.

Each op type's entry delegates to its `OpDef` kernel (the same kernels the reference
executor `xrt.network.run_network_reference` uses), so the host backend and the reference
agree bit for bit, integer kernels included. ``HardOp`` is registered too, so a network
holding one binds, but its init function refuses it: an NPU program cannot run on the host
(XrtError 11013 from `apply`).

Operator state (`Backend.op_state`): the op's kernel and read-only views of its parameter
arrays, resolved once by `apply` instead of at every forward. Host parameters are already
host memory, so nothing is copied.

Tuning (`xrt.tuning`): with `HostBackend.tuning` set, ``QConv2d`` runs the kernel variant
its record names (im2col + matmul, or per-tap accumulation; bit-exact), timed at `apply`
when none is trusted and `HostBackend.tune` is on.

Run-time parameters: the host takes operators whose parameters or attributes are fed at
run time (``Operator.fed``, `runtime_params`). Their fed values are the operator's last
inputs; at each forward the kernel gets them as parameters, or as attributes
(`xrt.network.bind_fed`), and the data inputs as usual. Operators without fed roles run
exactly as before.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from xrt.backend._arrays import read_array
from xrt.backend._base import Backend
from xrt.backend._names import register_backend_type
from xrt.device import Device, HostDevice
from xrt.errors import ErrorCode, XrtError
from xrt.network import Operator, bind_fed
from xrt.ops import BOUNDARY_OP_TYPES, ForwardFn, get_op_def, op_types
from xrt.tensor import Tensor
from xrt.tuning import HostTuner

__all__ = ["HostBackend", "HostOpState", "host_forward", "host_init"]


@dataclass(frozen=True)
class HostOpState:
    """What `host_init` prepares for one operator.

    Attributes:
        kernel: The op type's numpy kernel (`xrt.ops.OpDef.forward`).
        params: Parameter role -> read-only view of the array.
    """

    kernel: ForwardFn
    params: Mapping[str, np.ndarray]


def _readonly(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def host_init(op: Operator, backend: Backend) -> HostOpState:
    """Resolve the kernel and the parameters of `op` (read-only views, no copies).

    Raises:
        XrtError: 11013 for ``HardOp`` (an NPU program has no host kernel).
    """
    if op.op_type == "HardOp":
        raise XrtError(
            ErrorCode.BACKEND_INTERNAL,
            f"{op.describe()} is an NPU program for target {op.attrs.get('target')!r}: "
            f"HostBackend cannot run it (bind it to that NPU's backend)",
        )
    view = backend.network_view
    assert view is not None
    params = {role: _readonly(view.params[name]) for role, name in op.params.items()}
    kernel = get_op_def(op.op_type).forward
    if backend.tuning is not None:  # a kernel variant, timed once and recorded (`xrt.tuning`)
        chosen = HostTuner(backend.tuning, tune=backend.tune).kernel_for(op, view)
        kernel = chosen or kernel
    return HostOpState(kernel, MappingProxyType(params))


def host_forward(
    op: Operator, inputs: list[Tensor], outputs: list[Tensor], backend: Backend
) -> Sequence[np.ndarray]:
    """Run the numpy kernel on zero-copy views of the input tensors."""
    state: HostOpState = backend.op_state(op.op_id)
    if backend.time_profile:
        t0 = time.perf_counter()
        arrays = [read_array(t) for t in inputs]
        backend.add_time(memory=time.perf_counter() - t0)
    else:
        arrays = [read_array(t) for t in inputs]
    if op.fed:  # run-time parameters: the last inputs are the fed arrays
        n = len(arrays) - len(op.fed)
        bound, params = bind_fed(op, dict(zip(op.fed, arrays[n:], strict=True)), state.params)
        return state.kernel(bound, arrays[:n], params)
    return state.kernel(op, arrays, state.params)


@register_backend_type("host")
class HostBackend(Backend):
    """The host CPU: runs every op type of `xrt.ops` with its numpy kernel.

    Its device is a `HostDevice` (default: ``HostDevice.default()``). Hardware time is
    always 0; memory time is the time spent viewing inputs and copying results into
    their tensors.

    Op types registered in `xrt.ops` after this module was imported are not known here;
    add them with ``HostBackend.add_op(op_type, host_forward, init=host_init)``.
    """

    is_host = True
    runtime_params = True

    def default_device(self) -> Device:
        return HostDevice.default()

    def check_device(self, device: Device) -> None:
        if not isinstance(device, HostDevice):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"HostBackend runs on a HostDevice, got {type(device).__name__} {device!r}",
            )


for _op_type in op_types():
    if _op_type not in BOUNDARY_OP_TYPES:  # every backend passes those through
        HostBackend.add_op(_op_type, host_forward, init=host_init)
