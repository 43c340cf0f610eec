"""NPU device classes and the URL schemes that open them.

- ``grpc://HOST:PORT[/DEVICE]``: the emulator (`xrt.transport.grpc.GrpcTransport`);
  ``record=FILE`` records the lease client-side, as a board's session (below);
- ``axi://BOARD?npu=...&dma=...&target=...&file=...``: a board through ``/dev/mem`` or a
  file laid out like it (`xrt.transport.mmap.MmapTransport`); ``record=FILE`` (and
  ``record_max_mib=N``) records the session client-side (`xrt.transport.recorder`) for
  ``npu-emu replay``;
- ``labgrid://PLACE``: the emulated NPU of a labgrid place this user holds (`xrt.farm`,
  needs the ``farm`` extra), opened as its ``grpc://`` device.

Both build a `BuyiDevice` or a `ZG330Device` for the target the transport reports
(`open_device`). Device parameters common to both schemes: ``bounce=BYTES`` (the DMA
bounce buffer in ``udma``), ``double_buffer=0|1``, ``probe=0|1`` (check the ID registers at
open), ``reset=0|1`` (reset the device at open, as the manual's device init does; default
1 where the transport can reset, 0 on a board and on a warm-started emulator's device). An
unknown parameter is an error (11010), so a typo is not silently ignored.

Importing this package registers the schemes; grpc is imported only when a ``grpc://`` URL
is opened.
"""

from __future__ import annotations

from collections.abc import Iterable

from xrt.device import DeviceURL, register_device
from xrt.errors import ErrorCode, XrtError
from xrt.npu_device.dma_region import DMA_ERRORS, DmaEngine, DmaMemRegion
from xrt.npu_device.npu import (
    DEFAULT_BOUNCE_BYTES,
    DEVICE_URL_PARAMS,
    BuyiDevice,
    NpuDevice,
    ZG330Device,
    device_class,
)
from xrt.transport import NpuTransport

__all__ = [
    "DEFAULT_BOUNCE_BYTES",
    "DMA_ERRORS",
    "BuyiDevice",
    "DmaEngine",
    "DmaMemRegion",
    "NpuDevice",
    "ZG330Device",
    "device_class",
    "open_axi",
    "open_device",
    "open_grpc",
    "open_labgrid",
]


def _check_params(url: DeviceURL, known: Iterable[str]) -> None:
    names = sorted(known)
    unknown = [k for k in url.params if k not in names]
    if unknown:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"device URL {url.raw!r}: unknown parameter(s) {', '.join(unknown)} "
            f"(known: {', '.join(names)})",
        )


def _flag(url: DeviceURL, name: str, default: bool) -> bool:
    value = url.get_int(name, int(default))
    if value not in (0, 1):
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"device URL {url.raw!r}: {name}={value} must be 0 or 1"
        )
    return bool(value)


def open_device(transport: NpuTransport, url: DeviceURL | None = None) -> NpuDevice:
    """Build the device class of the transport's target over it (`BuyiDevice`,
    `ZG330Device`), with the device parameters of `url`. The device owns the transport;
    on failure the transport is closed.

    Raises:
        XrtError: 11010 for an unknown target or bad parameters; what the class raises.
    """
    try:
        cls = device_class(transport.info.target)
        kwargs: dict[str, object] = {}
        if url is not None:
            bounce = url.get_int("bounce")
            if bounce is not None:
                kwargs["bounce_bytes"] = bounce
            kwargs["double_buffer"] = _flag(url, "double_buffer", True)
            kwargs["probe"] = _flag(url, "probe", True)
            warm = transport.info.warm_start  # serve --warm: its state is the point
            kwargs["reset"] = _flag(url, "reset", transport.can_reset and not warm)
    except BaseException:
        transport.close()
        raise
    return cls(transport, url, **kwargs)  # type: ignore[arg-type]


@register_device("grpc://")
def open_grpc(url: DeviceURL) -> NpuDevice:
    """Factory of ``grpc://`` URLs: lease a device of an ``npu-emu serve`` server; with
    ``record=FILE``, the lease is recorded client-side as a board session is
    (`xrt.transport.recorder`), whether or not the server records."""
    from xrt.transport.grpc import URL_PARAMS, GrpcTransport
    from xrt.transport.recorder import RECORD_URL_PARAMS, recording_from_url

    _check_params(url, (*URL_PARAMS, *DEVICE_URL_PARAMS, *RECORD_URL_PARAMS))
    return open_device(recording_from_url(GrpcTransport.from_url(url), url), url)


@register_device("grpcs://")
def open_grpcs(url: DeviceURL) -> NpuDevice:
    """Factory of ``grpcs://`` URLs: a ``grpc://`` device over TLS."""
    return open_grpc(url)


@register_device("axi://")
def open_axi(url: DeviceURL) -> NpuDevice:
    """Factory of ``axi://`` URLs: map a board's NPU through ``/dev/mem`` (or a file);
    with ``record=FILE``, the session is recorded client-side (`xrt.transport.recorder`)."""
    from xrt.transport.mmap import URL_PARAMS, MmapTransport
    from xrt.transport.recorder import RECORD_URL_PARAMS, recording_from_url

    _check_params(url, (*URL_PARAMS, *DEVICE_URL_PARAMS, *RECORD_URL_PARAMS))
    return open_device(recording_from_url(MmapTransport.from_url(url), url), url)


@register_device("labgrid://")
def open_labgrid(url: DeviceURL) -> NpuDevice:
    """Factory of ``labgrid://`` URLs: the NPU of a held labgrid place (docs/farm.md).
    labgrid is imported only here, when such a URL is opened."""
    from xrt.farm import open_labgrid as open_farm_device

    return open_farm_device(url)
