"""How a `Session` binds operators to backends: by priority (`Session.create`,
`Session.create_by_order`) or as the caller already bound them
(`Session.create_with_backends`).

The boundary ops ``Input`` and ``Output`` (`xrt.ops.boundary`) compute nothing: they go
to the session's host backend when it has one, else to its first backend (`boundary_home`),
unless a backend given to `create_with_backends` holds them in its view."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence

from xrt.backend._base import Backend
from xrt.backend._registry import BindContext
from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkView, as_view
from xrt.ops import is_boundary

__all__ = [
    "assign_by_priority",
    "bind_by_priority",
    "boundary_home",
    "check_bindings",
    "resolve_devices",
]


def boundary_home(backends: Sequence[Backend]) -> Backend:
    """Where the Input and Output ops go: the first host backend, else the first backend."""
    return next((b for b in backends if b.is_host), backends[0])


_log = logging.getLogger("xrt.session")


def bind_by_priority(
    network: Network | NetworkView,
    backends: list[Backend],
    devices: Sequence[Device | None] | None,
    what: str,
) -> tuple[NetworkView, dict[int, Backend]]:
    """Bind each operator to the first backend that supports it, then initialise every
    backend that got operators with its view and device; return (view, op id -> backend).

    A backend that cannot run on its device (`Backend.unsupported`: MindSpore Lite's
    delegate ``Init`` answering ``RET_NOT_SUPPORT``) is left out with a warning, its
    ``not_supported`` saying why: its operators go to the backends after it."""
    graph = as_view(network, what)
    resolved = resolve_devices(backends, devices, what)
    usable = []
    for b, d in zip(backends, resolved, strict=True):
        # MindSpore Lite's delegate Init: RET_NOT_SUPPORT falls back to the built-in kernels.
        b.not_supported = b.unsupported(d)
        if b.not_supported is None:
            usable.append(b)
            continue
        _log.warning(
            "%s: %s cannot run on %r (%s): its operators go to the backends after it",
            what,
            type(b).__name__,
            d,
            b.not_supported,
        )
    bindings = assign_by_priority(graph, usable, what)
    for b, d in zip(backends, resolved, strict=True):
        ids = [op.op_id for op in graph.ops if bindings[op.op_id] is b]
        if ids:
            b.init(graph.network.view(ids), d)
    return graph, bindings


def assign_by_priority(
    graph: NetworkView, backends: Sequence[Backend], what: str
) -> dict[int, Backend]:
    """Op id -> the first of `backends` supporting it, in network order (the constraints
    see the bindings made before). No backend is initialised: binding needs no device."""
    bindings: dict[int, Backend] = {}
    ctx = BindContext(graph, bindings)
    for op in graph.ops:
        if is_boundary(op) and backends:
            bindings[op.op_id] = boundary_home(backends)
            continue
        for b in backends:
            if b.is_op_supported(op, ctx):
                bindings[op.op_id] = b
                break
        else:
            names = ", ".join(type(b).__name__ for b in backends)
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"{what}: no backend among [{names}] runs {op.describe()}"
            )
    return bindings


def resolve_devices(
    backends: Sequence[Backend], devices: Sequence[Device | None] | None, what: str
) -> list[Device]:
    """One open, suitable device per backend (None: the backend's default).

    Devices pair with backends by position. When that pairing does not fit (a backend
    refuses its device: `Backend.device_refusal`), the devices are paired by what each
    backend accepts instead, provided exactly one pairing fits: the manual writes
    ``Session.Create([BuyiBackend, HostBackend], view, [HostDevice.Default(), Device()])``.
    None (a default device) fits any backend in that search.

    Raises:
        XrtError: 11003 for an empty backend list or counts that differ; 11010 for a
            non-device, or naming the backends and devices when no pairing, or more than
            one, fits; 11012 for a closed device.
    """
    if not backends:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what}: no backends given")
    if devices is None:
        devices = [None] * len(backends)
    if isinstance(devices, Device) or not isinstance(devices, Sequence):
        raise XrtError(ErrorCode.WRONG_TYPE, f"{what}: devices must be a list")
    if len(devices) != len(backends):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{what}: {len(backends)} backend(s) but {len(devices)} device(s)",
        )
    for dev in devices:
        if dev is not None and not isinstance(dev, Device):
            raise XrtError(ErrorCode.WRONG_TYPE, f"{what}: {dev!r} is not a Device")
        if dev is not None and dev.closed:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{what}: {dev!r} is closed")
    paired = _pair(backends, list(devices), what)
    resolved: list[Device] = []
    for b, dev in zip(backends, paired, strict=True):
        d = b.default_device() if dev is None else dev
        if not isinstance(d, Device):
            raise XrtError(ErrorCode.WRONG_TYPE, f"{what}: {d!r} is not a Device (for {b!r})")
        if d.closed:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{what}: {d!r} is closed")
        b.check_device(d)
        resolved.append(d)
    return resolved


_MAX_PAIRING_SEARCH = 8
"""Backends beyond which no pairing other than by position is searched (8! orders)."""


def _pair(
    backends: Sequence[Backend], devices: list[Device | None], what: str
) -> list[Device | None]:
    """`devices` in the order that pairs each with a backend accepting it: by position when
    that fits, else the one order that fits (see `resolve_devices`)."""

    def fits(order: Sequence[Device | None]) -> bool:
        return all(
            d is None or b.device_refusal(d) is None for b, d in zip(backends, order, strict=True)
        )

    if fits(devices):
        return devices
    found: dict[tuple[int, ...], tuple[Device | None, ...]] = {}
    if len(devices) <= _MAX_PAIRING_SEARCH:
        for order in itertools.permutations(devices):
            if fits(order):
                found.setdefault(tuple(id(d) for d in order), order)
    if len(found) == 1:
        return list(next(iter(found.values())))
    names = ", ".join(type(b).__name__ for b in backends)
    devs = ", ".join("default" if d is None else repr(d) for d in devices)
    why = "more than one pairing fits" if found else "no pairing fits"
    refusals = "; ".join(
        f"{type(b).__name__}: {b.device_refusal(d)}"
        for b, d in zip(backends, devices, strict=True)
        if d is not None and b.device_refusal(d) is not None
    )
    raise XrtError(
        ErrorCode.WRONG_TYPE,
        f"{what}: cannot pair backends [{names}] with devices [{devs}]: {why} "
        f"(by position: {refusals})",
    )


def check_bindings(
    network: Network | NetworkView, backends: Sequence[Backend]
) -> tuple[NetworkView, dict[int, Backend]]:
    """The bindings of backends already bound to views of `network` (see
    `Session.create_with_backends` for what is checked); return (view, op id -> backend)."""
    graph = as_view(network, "Session.create_with_backends")
    if not isinstance(backends, Sequence) or not backends:
        raise XrtError(
            ErrorCode.WRONG_TYPE, "create_with_backends takes a non-empty list of backends"
        )
    ids = set(graph.op_ids)
    bindings: dict[int, Backend] = {}
    for b in backends:
        if not isinstance(b, Backend):
            raise XrtError(ErrorCode.WRONG_TYPE, f"{b!r} is not a Backend object")
        view = b.network_view
        if view is None:
            raise XrtError(ErrorCode.WRONG_ORDER, f"create_with_backends: {b!r} is not initialised")
        if view.network is not graph.network:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"create_with_backends: {b!r} is bound to network {view.network.name!r}, "
                f"not {graph.network.name!r}",
            )
        for op_id in view.op_ids:
            if op_id not in ids:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"create_with_backends: op {op_id} of {b!r} is not in {graph.name}",
                )
            if op_id in bindings:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"create_with_backends: op {op_id} is bound to {bindings[op_id]!r} and {b!r}",
                )
            bindings[op_id] = b
    home = boundary_home(backends)
    for op in graph.ops:  # boundary ops no view holds: the host (or first) backend's
        if is_boundary(op) and op.op_id not in bindings:
            bindings[op.op_id] = home
    missing = sorted(ids - set(bindings))
    if missing:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE, f"create_with_backends: op(s) {missing} are not bound"
        )
    ctx = BindContext(graph, bindings)
    for op in graph.ops:
        b = bindings[op.op_id]
        if not b.is_op_supported(op, ctx):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"create_with_backends: {type(b).__name__} does not accept {op.describe()}",
            )
    return graph, bindings
