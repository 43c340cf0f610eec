"""Compiling without a device, and checking that compiled programs fit the device given.

``xrt compile`` (`xrt.session.container`) prepares a session for a target with no device
at all. `bind_compile_only` binds an NPU backend to its operators and no device: the
backend's `apply` and the session's `partition` then run the very code they run on a
device (segments, `_program_for`, the program cache), with the target's on-chip memory
size from the hardware configuration (`hardop_builder.ocm_bytes`) where a device's
``ocm`` region would give it, and record each program instead of uploading it. The
programs, and so `snapshot_state`, are the same bytes a session on a device of that
target compiles, which is why ``create_with_snapshot(..., verify=True)`` accepts them.
Running a compile-only backend is refused.

`check_options` is the other end: when a snapshot or container is restored on a device,
its target, hardware version, compute-engine configuration and OCM size must be the
device's, else it is refused naming both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xrt.backend._base import Backend
from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import NpuConfig
from xrt.hw.targets import HW_VERSION
from xrt.network import NetworkView

__all__ = ["HW_VERSION_TEXT", "bind_compile_only", "check_options", "compile_only_refusal"]

HW_VERSION_TEXT = ".".join(map(str, HW_VERSION))
"""The hardware version the runtime compiles for (``rtl/config/npu.toml``), as devices
report it."""


def bind_compile_only(backend: Backend, view: NetworkView) -> None:
    """Bind `backend` to the operators of `view` without a device (see the module docstring).

    Raises:
        XrtError: 11012 when the backend is already bound; 11010 for an operator type
            it has no kernel for.
    """
    name = type(backend).__name__
    if backend.initialized:
        raise XrtError(ErrorCode.WRONG_ORDER, f"{name} is already initialised")
    missing = [op.describe() for op in view.ops if not backend.supports(op.op_type)]
    if missing:
        raise XrtError(ErrorCode.WRONG_TYPE, f"{name} has no kernel for {', '.join(missing[:5])}")
    # What `Backend.init` does, minus the device and the engine driver `_init` opens on it.
    backend.network_view = view
    backend.device = None


def compile_only_refusal(backend: Backend) -> XrtError:
    """The error a compile-only backend raises when asked to run."""
    return XrtError(
        ErrorCode.WRONG_ORDER,
        f"{type(backend).__name__} was prepared without a device (a compile-only session, "
        f"xrt compile): load its container on a {backend.TARGET} device to run it",
    )


def check_options(
    backend: Backend, options: Mapping[str, Any], config: NpuConfig, ocm_bytes: int
) -> None:
    """Refuse a snapshot's NPU options that do not fit `backend` and its device: the
    backend compiles for `config` with `ocm_bytes` of on-chip memory.

    Options written before containers existed carry no ``hw_version`` or ``ocm_bytes``:
    those checks are then skipped (the programs were compiled on a device, as the target's).

    Raises:
        XrtError: 11011 naming what the programs were compiled for and what is here.
    """
    name, here = type(backend).__name__, backend.TARGET
    target = options.get("target")
    if target != here:
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"its NPU programs were compiled for target {target!r}; this is {name} "
            f"(target {here!r}): compile it for {here!r} (xrt compile MODEL --target {here})",
        )
    mine = {k: getattr(config, k) for k in config.__dataclass_fields__}
    theirs = options.get("config")
    if theirs != mine:
        if isinstance(theirs, dict):
            diff = sorted(k for k in set(mine) | set(theirs) if theirs.get(k) != mine.get(k))
            what = ", ".join(f"{k} {theirs.get(k)!r} vs {mine.get(k)!r}" for k in diff)
        else:
            what = f"{theirs!r} vs {mine}"
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"its NPU programs were compiled for {target} hardware with another compute-engine "
            f"configuration than this {name}'s ({what}: the container's vs this device's)",
        )
    version = options.get("hw_version")
    device = backend.device  # None when compiling without a device: the runtime's version
    device_version = (device.hw_version if device is not None else None) or HW_VERSION_TEXT
    if version is not None and version != device_version:
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"its NPU programs were compiled for {target} hardware version {version!r}; "
            f"this device is version {device_version!r}",
        )
    ocm = options.get("ocm_bytes")
    if ocm is not None and ocm != ocm_bytes:
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"its NPU programs were compiled for {target} hardware with {ocm} bytes of "
            f"on-chip memory; this device has {ocm_bytes}",
        )
