"""Backends: the compute resources a `xrt.session.Session` binds operators to.

* `Backend`: the base class, its life cycle (``init``, ``apply``, ``fork``, ``view``,
  ``deinit``) and its per-class operator registry (``@MyBackend.op("Conv2d", init=...,
  constraint=...)``, the manual's ``ICRAFT_ADD_OP_TO_BACKEND``).
* `HostBackend`: every op type of `xrt.ops` with the numpy host kernels.
* `create_backend(T, view, device)`: ``T.create(view, device)``, the class first (the
  manual's ``Backend.Create(HostBackend, view, device)``).
* `Subgraph`: consecutive operators a non-host backend runs as one unit
  (`Backend.forward_subgraph`, the hook NPU backends override).
* `BindContext`: what a constraint may ask about the bindings made so far.
* `BOUNDARY_ENTRY`: every backend's entry for the ``Input`` and ``Output`` ops, which
  pass their tensors through (`xrt.ops.boundary`).
* `register_backend_type` / `get_backend_type`: backend classes by name (``xrt run``).
* `read_array` / `write_array`: a tensor's values as numpy and back (zero-copy where the
  memory allows).

docs/session.md describes how these fit together.
"""

from xrt.backend._arrays import read_array, write_array
from xrt.backend._base import Backend, Subgraph
from xrt.backend._names import (
    backend_types,
    create_backend,
    get_backend_type,
    register_backend_type,
)
from xrt.backend._registry import (
    BOUNDARY_ENTRY,
    BackendOp,
    BindContext,
    OpConstraintFn,
    OpForwardFn,
    OpInitFn,
)
from xrt.backend.host import HostBackend, HostOpState, host_forward, host_init

__all__ = [
    "BOUNDARY_ENTRY",
    "Backend",
    "BackendOp",
    "BindContext",
    "HostBackend",
    "HostOpState",
    "OpConstraintFn",
    "OpForwardFn",
    "OpInitFn",
    "Subgraph",
    "backend_types",
    "create_backend",
    "get_backend_type",
    "host_forward",
    "host_init",
    "read_array",
    "register_backend_type",
    "write_array",
]

# The NPU backends register the names "buyi" and "zg330" (``xrt run --backends buyi,host``).
from xrt.backend.npu import BuyiBackend, NpuBackend, ZG330Backend

__all__ += ["BuyiBackend", "NpuBackend", "ZG330Backend"]
