"""Program containers: a session compiled for a target without any device (``xrt compile``).

A program container is a session snapshot (`xrt.session.snapshot`: the network, the
bindings, each backend's options and the compiled NPU programs, checksummed) made without
a device: `compile_session` binds the operators of a (quantized) network
by priority to the target's NPU backend and the host (as ``Session.create([ZG330Backend,
HostBackend], ...)`` does on a device), binds the NPU backend with
`xrt.backend.npu.bind_compile_only` and applies: the programs are compiled exactly as on a
device of the target and recorded, not uploaded. `compile_container` writes it. Its
manifest says the target and hardware it was compiled for, the buffer mappings and the
placement; ``Session.create_with_snapshot`` and `xrt.aic.Qpc` load it on a device of that
target (another target or hardware configuration is refused naming both).
"""

from __future__ import annotations

import os

from xrt.backend import HostBackend, get_backend_type
from xrt.backend.npu import NpuBackend, bind_compile_only
from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import NpuConfig
from xrt.hw.targets import TARGETS
from xrt.network import Network, NetworkView, as_view
from xrt.session._binding import assign_by_priority
from xrt.session._session import Session

__all__ = ["compile_container", "compile_session", "npu_backend_type"]


def npu_backend_type(target: str) -> type[NpuBackend]:
    """The NPU backend class of `target` (``"buyi"``: `BuyiBackend`, ``"zg330"``:
    `ZG330Backend`).

    Raises:
        XrtError: 11010 for another name.
    """
    t = get_backend_type(target) if target in TARGETS else None
    if not (isinstance(t, type) and issubclass(t, NpuBackend)):
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"unknown target {target!r} (known: {', '.join(TARGETS)})"
        )
    return t


def compile_session(
    network: Network | NetworkView, target: str, *, config: NpuConfig | None = None
) -> Session:
    """An applied session of `network` on `target`'s NPU backend and the host, compiled
    without a device (see the module docstring). It can be dumped (`Session.dump_snapshot`)
    and inspected (`placement`, `execution_units`, the backend's `program`); running it is
    refused (11012).

    Args:
        network: The (quantized) network, or a view of it.
        target: ``"buyi"`` or ``"zg330"``.
        config: The compute engine's sizes to compile for (default: this runtime's, which
            the devices of this hardware version have).

    Raises:
        XrtError: 11010 for an unknown target or a config that is not an `NpuConfig`; what
            binding and compiling raise.
    """
    npu = npu_backend_type(target)()
    if config is not None:
        if not isinstance(config, NpuConfig):
            raise XrtError(ErrorCode.WRONG_TYPE, f"config must be an NpuConfig, not {config!r}")
        npu.config = config
    backends = [npu, HostBackend()]
    what = f"compiling for {target}"
    graph = as_view(network, what)
    bindings = assign_by_priority(graph, backends, what)
    for b in backends:
        ids = [op.op_id for op in graph.ops if bindings[op.op_id] is b]
        if not ids:
            continue
        if b is npu:
            bind_compile_only(npu, graph.network.view(ids))
        else:
            b.init(graph.network.view(ids))  # the host backend's own (host) device
    return Session(graph, backends, bindings).apply()


def compile_container(
    network: Network | NetworkView,
    target: str,
    path: str | os.PathLike[str],
    *,
    config: NpuConfig | None = None,
) -> None:
    """Compile `network` for `target` without a device (`compile_session`) and write the
    program container to `path`.

    Raises:
        XrtError: as `compile_session`; 11002 when the file cannot be written.
    """
    with compile_session(network, target, config=config) as sess:
        sess.dump_snapshot(path)
