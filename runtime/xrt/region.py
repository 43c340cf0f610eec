"""`Region`: what memory and register regions share (a named range of physical addresses
that belongs to at most one device and is closed with it).

`xrt.memory.MemRegion` and `xrt.registers.RegRegion` derive from it. As in cocotbext-axi's
``address_space.py``, a region's public methods check their arguments and then call
private hooks that a transport implements; this base holds the checks both kinds repeat
(name, base and size, the 64-bit limit, the closed state, whether a span lies inside the
region and how an access outside it is worded) and the one hook both have, `_close`.

A `Device` owns its regions: `Device.add_region` sets the back-reference (`device`), and
`Device.close` marks each region closed and calls its `_close` hook; from then on every
operation that checks `_check_open` raises XrtError 11012. Regions sit below devices: what
a region knows of its device is `RegionOwner`.
"""

from __future__ import annotations

from abc import ABC
from typing import Protocol

from xrt._checks import ADDR_LIMIT, as_size, hex_range
from xrt.errors import ErrorCode, XrtError

__all__ = ["Region", "RegionOwner"]


class RegionOwner(Protocol):
    """What a region knows of the device it belongs to (`xrt.device.Device` is the one):
    its name and its simulated cycle count, which register traces record. Whoever needs
    the device itself gets it from `Region.device`."""

    @property
    def name(self) -> str | None: ...
    @property
    def cycles(self) -> int | None: ...


class Region(ABC):  # noqa: B024 - the kinds of region declare the abstract hooks
    """A named range of physical addresses ``[base, base + size)`` on a device.

    Args:
        name: Region name (``"plddr"``, ``"npu"``...).
        base: Physical address of the first byte.
        size: Size in bytes.

    Raises:
        XrtError: 11010 for an empty or non-str name or non-int bounds, 11003 for negative
            bounds or a range past the 64-bit address space.
    """

    _kind = "region"
    """How messages name this kind of region (``"register region"`` for registers)."""

    def __init__(self, name: str, base: int, size: int) -> None:
        if not isinstance(name, str) or not name:
            raise XrtError(ErrorCode.WRONG_TYPE, f"region name must be a non-empty str: {name!r}")
        self._name = name
        self._base = as_size(base, "region base")
        self._size = as_size(size, "region size")
        if self._base + self._size > ADDR_LIMIT:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{self._kind} {name!r} {hex_range(self._base, self._size)} exceeds 64-bit "
                f"addresses",
            )
        self._device: RegionOwner | None = None  # set by Device.add_region
        self._closed = False  # set by Device.close

    # -- transport hook --------------------------------------------------------------------

    def _close(self) -> None:  # noqa: B027 - optional hook, empty by design
        """Release transport resources when the device closes."""

    # -- what it is ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """Region name."""
        return self._name

    @property
    def base(self) -> int:
        """Physical address of the first byte."""
        return self._base

    @property
    def size(self) -> int:
        """Size in bytes."""
        return self._size

    @property
    def end(self) -> int:
        """Physical address one past the last byte."""
        return self._base + self._size

    @property
    def device(self) -> RegionOwner | None:
        """The device the region belongs to (a `Device`; None for a free-standing region)."""
        return self._device

    @property
    def closed(self) -> bool:
        """True once the region's device has been closed."""
        return self._closed

    def __repr__(self) -> str:
        closed = " closed" if self._closed else ""
        return (
            f"<{type(self).__name__} {self._name!r} {hex_range(self._base, self._size)}"
            f"{self._repr_details()}{closed}>"
        )

    def _repr_details(self) -> str:
        """Extra text for `__repr__` after the range (empty by default)."""
        return ""

    # -- checks for the public methods of the kinds of region ------------------------------

    def _check_open(self) -> None:
        """Raise XrtError 11012 once the region's device has been closed."""
        if self._closed:
            raise XrtError(
                ErrorCode.WRONG_ORDER, f"region {self._name!r} is closed (its device was closed)"
            )

    def _spans(self, addr: int, nbytes: int) -> bool:
        """True when ``[addr, addr + nbytes)`` lies inside the region."""
        return self._base <= addr and addr + nbytes <= self._base + self._size

    def _outside(self, access: str) -> XrtError:
        """The XrtError 11003 for `access` (the caller's wording, e.g. ``"read of 4 B at
        0x10"``) falling outside the region."""
        return XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{access} is outside region {self._name!r} {hex_range(self._base, self._size)}",
        )
