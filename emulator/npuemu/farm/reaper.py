"""``npu-emu-farm reaper``: give back places whose device nobody uses any more.

labgrid's lock is advisory: a job killed with SIGKILL keeps its place acquired (and its
reservation) until someone releases it, which may be never. The emulator's lease is the
real guard and ends with the job (its HoldLease stream closes). The reaper watches every
acquired place holding ``NpuEmuDevice`` resources: once none of its devices has been leased
for `grace` seconds (counted from the later of the acquisition and the last lease seen; a
holder is a user and a reservation, since CI jobs often share one user name), it
cancels the place's reservation, then releases the place (in that order: the coordinator
then hands the place to a waiting reservation at once), only if the same user still holds
it.

It also keeps places whose device is unavailable (its server is down, the device is
leased outside the farm, or no exporter publishes it any more) out of the scheduler:
labgrid's scheduler looks at tags only and would hand such a place to the next
reservation. The reaper takes a reservation of its own
for the place (filter ``name=PLACE``, top priority) while the device stays unavailable, and
cancels it when the device is back; `labgrid-client reservations` shows it under the
reaper's user.

The grace must cover a job's time between acquiring a place and opening its device, and
between two opens; 30 s is the default. The lease state comes from the exporters (the
resource's ``extra.state``): the reaper needs the coordinator only, no server tokens.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass

from xrt.errors import XrtError
from xrt.farm import RESOURCE_CLASS, FarmClient, FarmDevice, coordinator_address, iter_places

__all__ = ["Reaper", "add_arguments", "run"]

log = logging.getLogger("npuemu.farm.reaper")


def _leased(device: FarmDevice, client: FarmClient) -> bool:
    return client.extra(device).get("state") == "leased"


@dataclass
class _Watch:
    holder: tuple[str, str]  # who holds the place: (user, reservation token)
    since: float  # monotonic time from which the place's devices count as unleased


class Reaper:
    """Releases places whose emulated NPUs have been unleased for `grace_s` seconds.

    Args:
        client: A session with the coordinator.
        grace_s: Seconds without a lease before a place is given back.
    """

    QUARANTINE_PRIO = 1000.0  # above any job's: the place goes to the reaper first

    def __init__(self, client: FarmClient, grace_s: float) -> None:
        self.client = client
        self.grace_s = grace_s
        self._watch: dict[str, _Watch] = {}
        self._quarantine: dict[str, str] = {}  # place -> the reaper's reservation token
        self._last_poll = 0.0

    def quarantine(self) -> None:
        """Hold a reservation on each place whose device is unavailable; drop it when the
        device is back (see the module docstring)."""
        now = time.monotonic()
        refresh = now - self._last_poll > 10.0  # reservations expire unless polled
        if refresh:
            self._last_poll = now
        for place, devices in iter_places(self.client):
            down = [d.where for d in devices if not d.avail]
            if not devices and any(m.cls == RESOURCE_CLASS for m in place.matches):
                down = [f"{RESOURCE_CLASS} of {place.name}: no exporter publishes it"]
            token = self._quarantine.get(place.name)
            if down and token is None and not place.acquired:
                token = self.client.reserve({"name": place.name}, prio=self.QUARANTINE_PRIO)
                self._quarantine[place.name] = token
                log.warning("quarantined %s: %s unavailable", place.name, down[0])
                print(f"npu-emu-farm reaper: quarantined {place.name}", flush=True)
            elif token is not None and not down:
                self.client.cancel(token)
                del self._quarantine[place.name]
                log.warning("%s is available again", place.name)
                print(f"npu-emu-farm reaper: returned {place.name}", flush=True)
            elif token is not None and refresh:
                self.client.poll_reservation(token)

    def close(self) -> None:
        """Cancel the reaper's own reservations."""
        for token in self._quarantine.values():
            self.client.cancel(token)
        self._quarantine.clear()

    def step(self) -> list[str]:
        """Look once; give back what is due. Returns the places given back."""
        now = time.monotonic()
        reaped = []
        acquired = set()
        self.quarantine()
        for place, devices in iter_places(self.client):
            if not place.acquired or not devices:
                continue
            acquired.add(place.name)
            # CI jobs often share one user name: the reservation tells two holders apart,
            # so a job that takes a place over between two looks gets its own grace.
            holder = (place.acquired, place.reservation or "")
            watch = self._watch.get(place.name)
            if watch is None or watch.holder != holder:
                watch = self._watch[place.name] = _Watch(holder, now)
            if any(_leased(d, self.client) for d in devices):
                watch.since = now
                continue
            if now - watch.since < self.grace_s:
                continue
            try:
                if place.reservation:
                    self.client.cancel(place.reservation)
                self.client.release(place.name, from_user=place.acquired)
            except XrtError as exc:
                # The coordinator may have done it anyway: look again from scratch, so the
                # next holder is never judged by this one's grace.
                log.warning("could not give back %s: %s", place.name, exc)
                del self._watch[place.name]
                continue
            log.warning(
                "gave back %s: held by %s, no lease on %s for %.1f s (reservation %s cancelled)",
                place.name,
                place.acquired,
                ", ".join(d.device for d in devices),
                now - watch.since,
                place.reservation or "none",
            )
            print(f"npu-emu-farm reaper: released {place.name} from {place.acquired}", flush=True)
            reaped.append(place.name)
            del self._watch[place.name]
        for name in set(self._watch) - acquired:
            del self._watch[name]
        return reaped

    def run(self, stop: threading.Event, interval_s: float) -> None:
        while not stop.is_set():
            self.step()
            try:  # wake on the coordinator's next update, or after interval_s
                self.client.wait_for(stop.is_set, interval_s, "reaper tick")
            except XrtError as exc:
                if exc.code.name != "TIMEOUT":
                    raise


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-c",
        "--coordinator",
        default=None,
        help="labgrid coordinator HOST:PORT (default $LG_COORDINATOR, else 127.0.0.1:20408)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="seconds a held place's devices may stay unleased before it is given back",
    )
    p.add_argument("--interval", type=float, default=0.5, help="seconds between looks")


def run(args: argparse.Namespace) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    address = coordinator_address(args.coordinator)
    try:
        client = FarmClient(address)
    except XrtError as exc:
        print(f"npu-emu-farm reaper: {exc}", file=sys.stderr)
        return 1
    print(
        f"npu-emu-farm reaper: watching {address} as {client.user}, grace {args.grace} s",
        flush=True,
    )
    reaper = Reaper(client, args.grace)
    try:
        reaper.run(stop, args.interval)
        reaper.close()
    except XrtError as exc:  # the coordinator went away: exit for systemd to restart us
        print(f"npu-emu-farm reaper: {exc}", file=sys.stderr)
        return 100
    finally:
        client.close()
    return 0
