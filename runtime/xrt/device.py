"""Devices (the manual's ``Device`` and ``HostDevice``), their URLs and the device registry.

A `Device` is a set of named regions: memory regions (`MemRegion`) and register regions
(`RegRegion`), one of each kind being the default. Devices are opened by URL (the URLs and
the registry of schemes live in `xrt.device_url`; their names are re-exported here)::

    dev = Device.open("axi://ql100aiu?npu=0x40000000&dma=0x80000000")

`Device.open` parses the URL into a `DeviceURL` (scheme, host, port, path and query
parameters, with hex and decimal integers already converted) and hands it to the factory
registered for the URL's scheme (and host, when one was registered for that pair)::

    @register_device("axi://ql100aiu")
    class Ql100Device(Device):
        def __init__(self, url: DeviceURL) -> None: ...

`host://` is registered here (`HostDevice`); transports register their own schemes; a
scheme nobody registered comes from the entry points of the group ``xrt.devices`` (that is
how the emulator adds ``sim://`` without the runtime ever importing it).

``Device()`` with no argument opens the default device (`default_device_url`): the URL in
``$XRT_DEVICE`` when set, else ``sim://buyi``, a simulated Buyi NPU private to the process
(the emulator's entry point; without the emulator the error says what to do).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from xrt._checks import as_seconds
from xrt._version import runtime_version
from xrt.accessor import SelfAccessor
from xrt.device_url import (
    DEFAULT_DEVICE_ENV,
    EMBEDDED_DEVICE_URL,
    ENTRY_POINT_GROUP,
    DeviceURL,
    default_device_url,
    entry_point_failure,
    entry_point_summary,
    find_factory,
    register_device,
    registered_devices,
    unregister_device,
)
from xrt.errors import ErrorCode, XrtError
from xrt.memory import HostMemRegion, MemChunk, MemRegion
from xrt.registers import RegRegion

__all__ = [
    "DEFAULT_DEVICE_ENV",
    "EMBEDDED_DEVICE_URL",
    "ENTRY_POINT_GROUP",
    "Device",
    "DeviceURL",
    "HostDevice",
    "ServerLogCallback",
    "default_device_url",
    "register_device",
    "registered_devices",
    "unregister_device",
]

_INSTALL_EMULATOR = (
    f"set {DEFAULT_DEVICE_ENV}=grpc://HOST:PORT (or another device URL) or install the "
    "emulator (pip install 'npu-emu[emulator]')"
)

ServerLogCallback = Callable[[int, str, str], None]
"""``callback(level, device, message)`` of `Device.follow_server_log` (a `logging` level)."""


class _DeviceType(type):
    """``Device()`` with no argument opens the default device (`Device.open_default`);
    everything else constructs as usual (``Device(url)``, ``HostDevice()``, subclasses)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Device and not args and not kwargs:
            return Device.open_default()
        return super().__call__(*args, **kwargs)


class Device(SelfAccessor, metaclass=_DeviceType):
    """A device: named memory and register regions, one default of each kind.

    A device called returns itself, so the manual's ``region.device()`` reads as
    ``region.device``.

    Subclasses (real devices, transports) build their regions in ``__init__`` with
    `add_region` and may override `_close` and `wait_irq`.

    What callers may ask of any device is declared here, with the answer of a device that
    does not know (None) or cannot (an error), and overridden by the devices that do (the
    NPU devices, `xrt.npu_device`): `name`, `target`, `hw_version`, `version`, `cycles`,
    `has_irq` and `wait_irq`, `follow_server_log`.

    ``Device()`` with no argument is the manual's default device: `open_default` (the URL in
    ``$XRT_DEVICE``, else the embedded ``sim://buyi``). ``Device(url)`` and subclasses build
    a device themselves.

    Args:
        url: The URL the device was opened with (a `DeviceURL` or a str), if any.

    Use as a context manager to close it reliably::

        with Device.open("host://") as dev:
            chunk = dev.malloc(1024)
    """

    def __init__(self, url: DeviceURL | str | None = None) -> None:
        self._url = DeviceURL.parse(url) if isinstance(url, str) else url
        self._mem: dict[str, MemRegion] = {}
        self._reg: dict[str, RegRegion] = {}
        self._default_mem: str | None = None
        self._default_reg: str | None = None
        self._closed = False
        self._close_lock = threading.Lock()

    @staticmethod
    def open(url: str) -> Device:
        """Open the device at `url` through the registry (the manual's ``Device::Open``).

        Raises:
            XrtError: 11010 when no factory is registered for the URL's scheme (the message
                lists the registered ones), 11003 for a malformed URL; whatever the
                factory raises (a transport that cannot connect raises 11014).
        """
        parsed = DeviceURL.parse(url)
        factory = find_factory(parsed)
        if factory is None:
            known = ", ".join(registered_devices()) or "none"
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"no device registered for {url!r} (registered: {known}; entry points of "
                f"{ENTRY_POINT_GROUP}: {entry_point_summary()})",
            )
        device = factory(parsed)
        if not isinstance(device, Device):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"factory for {url!r} returned {type(device).__name__}, not a Device",
            )
        return device

    @staticmethod
    def open_default() -> Device:
        """Open the default device (what ``Device()`` does): ``$XRT_DEVICE`` when set, else
        ``sim://buyi``, a simulated Buyi NPU private to this process (its simulation
        worker starts now and stops with the device, or with the process).

        Raises:
            XrtError: 11010 in one line saying to set ``XRT_DEVICE`` or install the
                emulator when ``XRT_DEVICE`` is not set and no ``sim://`` is available;
                whatever `open` raises.
        """
        url = default_device_url()
        if url == EMBEDDED_DEVICE_URL and find_factory(DeviceURL.parse(url)) is None:
            why = entry_point_failure("sim")
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"no default device: {_INSTALL_EMULATOR}"
                + (f" (the sim entry point failed: {why})" if why else ""),
            )
        return Device.open(url)

    # -- building --------------------------------------------------------------------------

    def add_region(self, region: MemRegion | RegRegion, *, default: bool = False) -> None:
        """Add a region (for device classes while they build themselves).

        The first region of each kind becomes the default; `default` makes this one it.

        Raises:
            XrtError: 11010 for a name already used or a non-region, 11012 when the region
                belongs to another device or this device is closed.
        """
        self._check_open()
        if not isinstance(region, MemRegion | RegRegion):
            raise XrtError(ErrorCode.WRONG_TYPE, f"not a region: {region!r}")
        if region.name in self._mem or region.name in self._reg:
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"device already has a region named {region.name!r}"
            )
        if region._device is not None:
            raise XrtError(
                ErrorCode.WRONG_ORDER, f"region {region.name!r} already belongs to a device"
            )
        region._device = self
        if isinstance(region, MemRegion):
            self._mem[region.name] = region
            if default or self._default_mem is None:
                self._default_mem = region.name
        else:
            self._reg[region.name] = region
            if default or self._default_reg is None:
                self._default_reg = region.name

    # -- what it is ------------------------------------------------------------------------

    @property
    def url(self) -> DeviceURL | None:
        """The URL the device was opened with."""
        return self._url

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def name(self) -> str | None:
        """The device's own name (``"npu0"`` on the emulator); None when it has none."""
        return None

    @property
    def target(self) -> str | None:
        """The NPU target the device is (``"buyi"``, ``"zg330"``); None for other devices."""
        return None

    @property
    def hw_version(self) -> str | None:
        """The hardware version the device reports; None when it does not say."""
        return None

    @property
    def cycles(self) -> int | None:
        """Simulated cycles at the device's last response; None where time is not
        simulated (real hardware, the host)."""
        return None

    def version(self) -> dict[str, str]:
        """Versions, by what they are of (the manual's ``Device::version()``, which a
        device's ``init`` prints): ``target`` and ``hardware`` where the device knows them,
        and ``runtime``, this runtime's. The NPU devices add their RTL's and emulator's
        (`xrt.npu_device.NpuDevice.version`)."""
        out = {}
        if self.target is not None:
            out["target"] = self.target
        if self.hw_version is not None:
            out["hardware"] = self.hw_version
        out["runtime"] = runtime_version()
        return out

    @property
    def mem_regions(self) -> Mapping[str, MemRegion]:
        """Memory regions by name (read-only view)."""
        return MappingProxyType(self._mem)

    @property
    def reg_regions(self) -> Mapping[str, RegRegion]:
        """Register regions by name (read-only view)."""
        return MappingProxyType(self._reg)

    def _check_open(self) -> None:
        if self._closed:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{self!r} is closed")

    def get_mem_region(self, name: str) -> MemRegion:
        """The memory region called `name`; XrtError 11010 lists the names."""
        self._check_open()
        region = self._mem.get(name) if isinstance(name, str) else None
        if region is None:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{type(self).__name__} has no memory region {name!r} "
                f"(has: {', '.join(self._mem) or 'none'})",
            )
        return region

    def get_reg_region(self, name: str) -> RegRegion:
        """The register region called `name`; XrtError 11010 lists the names."""
        self._check_open()
        region = self._reg.get(name) if isinstance(name, str) else None
        if region is None:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{type(self).__name__} has no register region {name!r} "
                f"(has: {', '.join(self._reg) or 'none'})",
            )
        return region

    def default_mem_region(self) -> MemRegion:
        """The default memory region (the manual's ``defaultMemRegion()``)."""
        self._check_open()
        if self._default_mem is None:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{type(self).__name__} has no memory region")
        return self._mem[self._default_mem]

    def default_reg_region(self) -> RegRegion:
        """The default register region (the manual's ``defaultRegRegion()``)."""
        self._check_open()
        if self._default_reg is None:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{type(self).__name__} has no register region")
        return self._reg[self._default_reg]

    def set_default_mem_region(self, name: str) -> Device:
        """Make the memory region `name` the default; returns the device."""
        self._default_mem = self.get_mem_region(name).name
        return self

    def set_default_reg_region(self, name: str) -> Device:
        """Make the register region `name` the default; returns the device."""
        self._default_reg = self.get_reg_region(name).name
        return self

    # -- shortcuts of the manual -----------------------------------------------------------

    def malloc(
        self,
        nbytes: int,
        *,
        region: str | None = None,
        auto_free: bool = True,
        alignment: int = 1,
    ) -> MemChunk:
        """Allocate on the default memory region, or on the one named `region`."""
        r = self.default_mem_region() if region is None else self.get_mem_region(region)
        return r.malloc(nbytes, auto_free, alignment)

    def read_reg(
        self, addr: int, relative: bool = False, *, region: str | None = None, width: int = 32
    ) -> int:
        """Read a register of the default register region (or of `region`); ``width=64``
        a LO/HI pair (`RegRegion.read`)."""
        r = self.default_reg_region() if region is None else self.get_reg_region(region)
        return r.read(addr, relative, width=width)

    def write_reg(
        self,
        addr: int,
        value: int,
        relative: bool = False,
        *,
        region: str | None = None,
        width: int = 32,
    ) -> None:
        """Write a register of the default register region (or of `region`); ``width=64``
        a LO/HI pair (`RegRegion.write`)."""
        r = self.default_reg_region() if region is None else self.get_reg_region(region)
        r.write(addr, value, relative, width=width)

    # -- interrupts ------------------------------------------------------------------------

    @property
    def has_irq(self) -> bool:
        """True when `wait_irq` is supported."""
        return False

    def wait_irq(self, timeout_s: float) -> bool:
        """Wait for the device's interrupt line; True if it fired, False on timeout.

        Devices with an interrupt (the emulator, a board through UIO) override this.

        Raises:
            XrtError: 11012 on a device without an interrupt line (this default), 11003 for
                a negative timeout.
        """
        as_seconds(timeout_s, "timeout_s")
        self._check_open()
        raise XrtError(
            ErrorCode.WRONG_ORDER, f"{type(self).__name__} has no interrupt line to wait for"
        )

    # -- logs ------------------------------------------------------------------------------

    def follow_server_log(self, callback: ServerLogCallback) -> Callable[[], None]:
        """Send the log lines a device server writes about this device to
        ``callback(level, device, message)`` until the returned function is called.

        Raises:
            XrtError: 11010 on a device without a server (this default).
        """
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"{self!r} is not an emulator device: it has no server log"
        )

    # -- closing ---------------------------------------------------------------------------

    def _close(self) -> None:
        """Release the device's own resources (transport connections); called once."""

    def close(self) -> None:
        """Close the device and its regions (the manual's ``Device::Close``); idempotent.

        Afterwards every region operation raises XrtError 11012.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        errors: list[Exception] = []
        for region in [*self._mem.values(), *self._reg.values()]:
            region._closed = True
            try:
                region._close()
            except Exception as exc:  # close everything, then report
                errors.append(exc)
        try:
            self._close()
        except Exception as exc:
            errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f" {self._url.raw!r}" if self._url is not None and self._url.raw else ""
        state = " closed" if self._closed else ""
        return f"<{type(self).__name__}{where}{state}>"


@register_device("host://")
class HostDevice(Device):
    """The host as a device: one memory region, ``"host"``, of host memory; no registers.

    ``HostDevice.default()`` is the process-wide instance tensors use by default; closing
    it does nothing. ``Device.open("host://")`` (or ``HostDevice()``) makes an independent
    one; its URL may set ``capacity=<bytes>`` to bound its region.

    Args:
        url: The URL it was opened with, if any.
        capacity: Bytes the region may hand out (None: as much as the OS gives).
    """

    _default: HostDevice | None = None
    _default_lock = threading.Lock()

    def __init__(self, url: DeviceURL | str | None = None, *, capacity: int | None = None) -> None:
        super().__init__(url)
        if capacity is None and self._url is not None:
            capacity = self._url.get_int("capacity")
        self.add_region(HostMemRegion("host", capacity=capacity), default=True)

    @classmethod
    def default(cls) -> HostDevice:
        """The process-wide host device (the manual's ``HostDevice::Default()``)."""
        dev = HostDevice._default
        if dev is None:
            with HostDevice._default_lock:
                dev = HostDevice._default
                if dev is None:
                    dev = HostDevice(DeviceURL.parse("host://"))
                    HostDevice._default = dev
        return dev

    @classmethod
    def default_region(cls) -> HostMemRegion:
        """The default host device's memory region (the manual's ``HostDevice::MemRegion()``)."""
        region = cls.default().default_mem_region()
        assert isinstance(region, HostMemRegion)
        return region

    def close(self) -> None:
        """Close the device; the process-wide default device stays open."""
        if self is HostDevice._default:
            return
        super().close()
