"""``sim://buyi`` and ``sim://zg330``: a simulated NPU private to the process, no server.

The runtime's default device (``Device()`` without ``$XRT_DEVICE``, ``xrt run`` without
``--device``). The runtime never imports this package: it finds `open_sim` through the
entry point ``sim`` of the group ``xrt.devices`` (pyproject.toml), loads it on the first
``sim://`` URL and registers it (`xrt.device`).

Opening one starts a simulation worker process of this process (the target's verilated
model, built once and cached in ``$NPU_EMU_BUILD_DIR``), with the server's own worker
machinery but no server, no port and no lease: `npuemu.embedded.worker`. The device is the
usual `BuyiDevice` / `ZG330Device` (`xrt.npu_device.open_device`) over a `SimTransport`
(`npuemu.embedded.transport`): register accesses and interrupt waits on a register ring
straight into the simulator, ``udma`` mapped. The worker stops with the device's close, at
interpreter exit, and when the process dies (no orphan, ever).

URL: ``sim://TARGET[?lockstep=0|1&record=FILE&record_max_mib=N&bounce=BYTES&double_buffer=0|1
&probe=0|1]``; TARGET is ``buyi`` or ``zg330``; ``lockstep=1`` checks every launch of the
compute engine against the golden model (docs/emulator.md, "Lockstep checking");
``record=FILE`` records the session client-side as a board's is (`xrt.transport.recorder`:
wall-clock times, polls run as loops of reads, no zero-copy memory), for ``npu-emu replay``;
the others are the device classes' (docs/runtime-transports.md).
"""

from __future__ import annotations

import importlib.util

from xrt.device import DeviceURL
from xrt.errors import ErrorCode, XrtError
from xrt.hw.targets import TARGETS
from xrt.npu_device import DEVICE_URL_PARAMS, NpuDevice, open_device
from xrt.transport.recorder import RECORD_URL_PARAMS, recording_from_url

# The simulator stack is the emulator extra: without it the entry point does not load, and
# the runtime says to install it (or to set XRT_DEVICE) instead.
_missing = [m for m in ("cocotb", "cocotb_tools") if importlib.util.find_spec(m) is None]
if _missing:
    raise ImportError(
        f"the simulator stack is not installed ({', '.join(_missing)} missing): "
        "pip install 'npu-emu[emulator]'"
    )

from npuemu.embedded.transport import SimTransport  # noqa: E402 (after the check above)

__all__ = ["URL_PARAMS", "SimTransport", "open_sim"]

URL_PARAMS = ("lockstep", *RECORD_URL_PARAMS)
"""The ``sim://`` URL's own parameters (beside the device classes', `DEVICE_URL_PARAMS`)."""


def open_sim(url: DeviceURL) -> NpuDevice:
    """Factory of ``sim://`` URLs (the ``xrt.devices`` entry point ``sim``): start a
    simulated NPU of the URL's target for this process.

    Raises:
        XrtError: 11010 for a target other than buyi or zg330, an unknown parameter or a
            bad value; 11003 for a port or a path; 11014 when the worker does not start.
    """
    known = ", ".join(f"sim://{t}" for t in TARGETS)
    if url.host not in TARGETS:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"device URL {url.raw!r}: no simulated target {url.host or ''!r} (known: {known})",
        )
    if url.port is not None or url.path not in ("", "/"):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"device URL {url.raw!r}: a sim:// URL names only a target ({known})",
        )
    names = sorted((*URL_PARAMS, *DEVICE_URL_PARAMS))
    unknown = [k for k in url.params if k not in names]
    if unknown:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"device URL {url.raw!r}: unknown parameter(s) {', '.join(unknown)} "
            f"(known: {', '.join(names)})",
        )
    lockstep = url.get_int("lockstep", 0)
    if lockstep not in (0, 1):
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"device URL {url.raw!r}: lockstep={lockstep} must be 0 or 1"
        )
    transport = SimTransport(f"sim://{url.host}", TARGETS[url.host], lockstep=bool(lockstep))
    return open_device(recording_from_url(transport, url), url)
