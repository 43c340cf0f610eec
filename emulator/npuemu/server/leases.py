"""Leases: who may use a device, and until when; and the device's life cycle around them.

A device has at most one lease. A lease ends when its holder closes it, when its HoldLease
stream closes (the client went away), or when its time-to-live passes without a call, a
KeepAlive or an open HoldLease stream. A holder that said in its HoldLease request that it
sends heartbeats (the runtime does: KeepAlive every TTL/3) gets no such exemption for its
stream: its silence alone counts, so a holder that is stopped or paused loses the lease
once its TTL passes, however long its connection stays open. A lease nobody has used since
it was granted (no HoldLease, KeepAlive or call with its id) ends after `UNCLAIMED_TTL_S`
whatever TTL it asked for: an OpenDevice whose answer never reached its client (a deadline,
a dropped connection) must not keep the device for up to an hour. The table remembers
recently ended leases so a late call is told why its lease is gone (ABORTED) rather than
that it never existed.

The device's state (`xrt.hw.wire.DeviceState`, reported by ListDevices) moves only along
`LIFE_CYCLE`::

    STARTING --> FREE --open--> LEASED --lease ends--> RESETTING --cleared--> FREE
        any state --worker died or hung--> RESTARTING --> LEASED (lease kept) | FREE

`npuemu.server.devices.SimDevice` makes every change through `check_transition`, so a
transition this table does not allow is a bug that fails loudly, not a device stuck in a
state nobody expected.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import grpc

from npuemu.server.errors import ServiceError
from xrt.hw.wire import DeviceState

__all__ = ["LIFE_CYCLE", "UNCLAIMED_TTL_S", "Lease", "LeaseTable", "check_transition"]

UNCLAIMED_TTL_S = 15.0

_S = DeviceState
LIFE_CYCLE: dict[DeviceState, frozenset[DeviceState]] = {
    _S.STARTING: frozenset({_S.FREE, _S.RESTARTING}),
    _S.FREE: frozenset({_S.LEASED, _S.RESTARTING}),
    _S.LEASED: frozenset({_S.RESETTING, _S.RESTARTING}),
    _S.RESETTING: frozenset({_S.FREE, _S.RESTARTING}),
    _S.RESTARTING: frozenset({_S.RESTARTING, _S.FREE, _S.LEASED}),
}
"""The states a device may move to from each state."""


def check_transition(device: str, old: DeviceState, new: DeviceState) -> None:
    """Raise RuntimeError when `LIFE_CYCLE` does not allow `old` -> `new` (a bug)."""
    if new != old and new not in LIFE_CYCLE[old]:
        raise RuntimeError(f"device {device}: no transition from {old.name} to {new.name}")


@dataclass
class Lease:
    """One holder's right to use one device."""

    device: str
    holder: str
    ttl_s: float
    id: str = field(default_factory=lambda: secrets.token_hex(12))
    last_seen: float = field(default_factory=time.monotonic)
    opened: float = field(default_factory=time.monotonic)
    holds: int = 0  # open HoldLease streams
    claimed: bool = False  # its id has been used since OpenDevice
    heartbeats: bool = False  # its holder calls KeepAlive: an open stream is no use

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    def expired(self, now: float) -> bool:
        ttl = self.ttl_s if self.claimed else min(self.ttl_s, UNCLAIMED_TTL_S)
        return (self.holds == 0 or self.heartbeats) and now - self.last_seen > ttl

    def expiry_reason(self) -> str:
        """Why an `expired` lease ends, for the log and a late call's ABORTED."""
        if not self.claimed and self.ttl_s > UNCLAIMED_TTL_S:
            return f"never used in the {UNCLAIMED_TTL_S:g} s after it was granted"
        silence = "heartbeat" if self.heartbeats and self.holds else "keep-alive"
        return f"no {silence} for {self.ttl_s:g} s"


class LeaseTable:
    """Live leases by id, and why recent ones ended."""

    def __init__(self, remember: int = 1024) -> None:
        self.live: dict[str, Lease] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._remember = remember

    def add(self, lease: Lease) -> None:
        self.live[lease.id] = lease

    def get(self, lease_id: str) -> Lease:
        """The live lease `lease_id`, touched; ServiceError says why there is none."""
        if not lease_id:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "this call needs a lease: open the device first",
            )
        lease = self.live.get(lease_id)
        if lease is None:
            reason = self._ended.get(lease_id)
            if reason is not None:
                raise ServiceError(grpc.StatusCode.ABORTED, f"this lease has ended ({reason})")
            # Lease ids are bearer credentials: never echoed into messages or logs.
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "unknown lease: open the device first",
            )
        lease.touch()
        lease.claimed = True
        return lease

    def ended_reason(self, lease_id: str) -> str | None:
        """Why lease `lease_id` ended (None: it did not, or too long ago)."""
        return self._ended.get(lease_id)

    def remove(self, lease: Lease, reason: str) -> bool:
        """End `lease`; False when it had already ended."""
        if self.live.pop(lease.id, None) is None:
            return False
        self._ended[lease.id] = reason
        while len(self._ended) > self._remember:
            self._ended.popitem(last=False)
        return True

    def expired(self) -> list[Lease]:
        now = time.monotonic()
        return [le for le in self.live.values() if le.expired(now)]
