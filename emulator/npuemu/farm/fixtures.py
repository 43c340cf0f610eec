"""Take a farm device for a job and give it back: reserve (waiting), acquire, open, close,
cancel the reservation, release.

    with hold_farm_device({"target": "zg330"}) as held:
        held.device.write_reg(...)

The order of giving back matters (measured with labgrid 26.0.1): cancelling the
reservation first and then releasing lets the coordinator hand the place to a waiting
reservation at once; releasing first leaves it allocated to the old reservation for
seconds, and releasing without cancelling blocks it for a minute or more.

In pytest, the session fixture ``farm_device`` of npu-emu's plugin
(`npuemu.pytest_plugin`, installed with the package) does the same with the tags of
``--farm-tags target=zg330`` (or ``$NPU_FARM_TAGS``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from xrt.errors import ErrorCode, XrtError
from xrt.farm import FarmClient

__all__ = ["HeldFarmDevice", "hold_farm_device", "parse_tags"]


@dataclass
class HeldFarmDevice:
    """A device taken from the farm: the place, the reservation and the opened device."""

    place: str
    token: str
    device: Any  # an xrt NpuDevice
    waited_s: float  # from the reservation to the allocation


def parse_tags(text: str) -> dict[str, str]:
    """``"target=zg330 pool=ci"`` -> ``{"target": "zg330", "pool": "ci"}``."""
    tags = {}
    for pair in text.replace(",", " ").split():
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise XrtError(ErrorCode.WRONG_TYPE, f"farm tag {pair!r} is not KEY=VALUE")
        tags[key] = value
    return tags


@contextlib.contextmanager
def hold_farm_device(
    tags: dict[str, str],
    *,
    coordinator: str | None = None,
    wait_s: float = 600.0,
    params: str = "",
) -> Iterator[HeldFarmDevice]:
    """Reserve a place whose tags include `tags` (waiting up to `wait_s`), acquire it, open
    its device (``labgrid://+TOKEN``), and give everything back on exit.

    Raises:
        XrtError: 11015 when no place is allocated in time; 11012 when the place cannot be
            acquired (the message says why: e.g. its server is down); what opening raises.
    """
    import xrt

    with FarmClient(coordinator) as client:
        token = client.reserve(tags)
        acquired = place = ""
        device = None
        try:
            t0 = time.monotonic()
            place = client.wait_reservation(token, wait_s)
            waited = time.monotonic() - t0
            try:
                client.acquire(place)
            except XrtError as exc:
                why = []
                for d in client.place_devices(client.place(place)):
                    state = "available"
                    if not d.avail:
                        state = f"unavailable: {client.extra(d).get('reason') or '?'}"
                    why.append(f"{d.where} is {state}")
                raise XrtError(
                    ErrorCode.WRONG_ORDER,
                    f"could not acquire farm place {place}: {exc} ({'; '.join(why)})",
                ) from None
            acquired = place
            url = f"labgrid://+{token}?coordinator={client.address}"
            device = xrt.Device.open(url + (f"&{params}" if params else ""))
            yield HeldFarmDevice(place, token, device, waited)
        finally:
            with contextlib.suppress(Exception):
                if device is not None:
                    device.close()
            client.cancel(token)
            if acquired:
                client.release(acquired, from_user=client.user)
