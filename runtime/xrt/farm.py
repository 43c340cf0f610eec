"""Farm devices: emulated NPUs shared through a labgrid coordinator (docs/farm.md).

``Device.open("labgrid://PLACE")`` opens the NPU of a labgrid place that this user has
acquired; ``labgrid://+`` names the place reserved under ``$LG_TOKEN`` (``labgrid://+TOKEN``
a given token). It never reserves or acquires: labgrid's lock is the farm's, the user (or a
CI fixture) takes it first. The device itself is a ``grpc://`` device of the exporting
``npu-emu serve``; its bearer token comes from ``$NPU_EMU_TOKEN`` (never from the resource's
parameters, which every farm user can list).

URL: ``labgrid://PLACE[?coordinator=HOST:PORT&name=RESOURCE&<grpc:// and device params>]``.
The coordinator defaults to ``$LG_COORDINATOR`` (else ``127.0.0.1:20408``), as labgrid's own
tools do; ``name`` picks one NpuEmuDevice when a place holds several.

`FarmClient` is the small synchronous coordinator client behind it (places, resources,
reservations, acquire and release); the farm's fixtures and reaper use it too. This module
imports labgrid, which is an optional extra: `xrt.npu_device` imports it only when a
``labgrid://`` URL is opened.
"""

from __future__ import annotations

import getpass
import itertools
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import grpc

from xrt.device import Device, DeviceURL
from xrt.errors import ErrorCode, XrtError

try:
    from labgrid.remote.common import Place, Reservation, ResourceEntry
    from labgrid.remote.generated import labgrid_coordinator_pb2 as lg_pb
    from labgrid.remote.generated import labgrid_coordinator_pb2_grpc as lg_grpc
    from labgrid.util import labgrid_version
except ImportError as exc:  # pragma: no cover - depends on the install
    raise XrtError(
        ErrorCode.LOAD_FAILED,
        f"labgrid:// needs labgrid ({exc}): pip install 'npu-emu[farm]'",
    ) from None

__all__ = [
    "DEFAULT_COORDINATOR",
    "RESOURCE_CLASS",
    "FarmClient",
    "FarmDevice",
    "coordinator_address",
    "farm_user",
    "open_labgrid",
]

RESOURCE_CLASS = "NpuEmuDevice"
"""The labgrid resource class of one emulated NPU (`npuemu.farm.resource`)."""

DEFAULT_COORDINATOR = "127.0.0.1:20408"
URL_PARAMS = ("coordinator", "name")
"""Query parameters ``labgrid://`` reads itself; the rest go to the ``grpc://`` device."""

log = logging.getLogger("xrt.farm")


def coordinator_address(address: str | None = None) -> str:
    """`address`, else ``$LG_COORDINATOR``, else labgrid's default; port 20408 if none."""
    address = address or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR
    if urlsplit(f"//{address}").port is None:
        address += ":20408"
    return address


def farm_user() -> str:
    """Who this process is to the coordinator: ``HOST/USER`` (labgrid honours
    ``$LG_HOSTNAME`` and ``$LG_USERNAME``, so do we)."""
    host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
    user = os.environ.get("LG_USERNAME") or getpass.getuser()
    return f"{host}/{user}"


@dataclass(frozen=True)
class FarmDevice:
    """One exported emulated NPU as the coordinator describes it."""

    path: tuple[str, str, str, str]  # exporter, group, class, resource name
    address: str
    port: int
    device: str
    target: str
    avail: bool
    acquired: str | None  # the place that holds the resource

    @property
    def grpc_url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"grpc://{host}:{self.port}/{self.device}"

    @property
    def where(self) -> str:
        return f"{self.device} on {self.address}:{self.port} ({'/'.join(self.path)})"

    @classmethod
    def from_entry(cls, path: tuple[str, str, str, str], entry: ResourceEntry) -> FarmDevice:
        args = entry.args
        return cls(
            path=path,
            address=str(args.get("address", "")),
            port=int(args.get("port", 0)),
            device=str(args.get("device", "")),
            target=str(args.get("npu_target", "")),
            avail=bool(entry.avail),
            acquired=entry.acquired,
        )


class FarmClient:
    """A synchronous session with a labgrid coordinator.

    It keeps labgrid's client stream open (the coordinator knows a client by it: acquiring
    needs it) and mirrors every place and resource, updated as the coordinator publishes
    them, so waiting for a change is waiting on a condition, not polling.

    Args:
        address: ``HOST[:PORT]`` of the coordinator (default: `coordinator_address`).
        timeout_s: How long connecting and each call may take.

    Raises:
        XrtError: 11014 when the coordinator does not answer.
    """

    def __init__(self, address: str | None = None, *, timeout_s: float = 10.0) -> None:
        self.address = coordinator_address(address)
        self.user = farm_user()
        self.timeout_s = timeout_s
        self.places: dict[str, Place] = {}
        self.resources: dict[tuple[str, str, str], ResourceEntry] = {}  # exporter, group, name
        self._cond = threading.Condition()
        self._synced: set[int] = set()
        self._ids = itertools.count(1)
        self._dead: str | None = None
        self._out: queue.Queue[Any] = queue.Queue()
        # The coordinator knows a client by its connection (peer address): a private
        # subchannel pool keeps two sessions of one process on two connections.
        self._channel = grpc.insecure_channel(
            self.address, options=[("grpc.use_local_subchannel_pool", 1)]
        )
        self._stub = lg_grpc.CoordinatorStub(self._channel)
        # gRPC runs the stream on two daemon threads of its own: one iterates the requests,
        # one polls the channel and ends the call. `close` waits for both (see there).
        self._sender: threading.Thread | None = None
        self._sender_known = threading.Event()
        self._poller: threading.Thread | None = None
        self._call_done = threading.Event()
        self._call = self._stub.ClientStream(self._requests())
        self._call.add_done_callback(self._on_call_done)
        self._reader = threading.Thread(target=self._pump, name="xrt-farm-client", daemon=True)
        self._reader.start()
        startup = lg_pb.ClientInMessage()
        startup.startup.version = labgrid_version()
        startup.startup.name = self.user
        self._out.put(startup)
        for kind in ("all_places", "all_resources"):
            msg = lg_pb.ClientInMessage()
            setattr(msg.subscribe, kind, True)
            self._out.put(msg)
        try:
            self.sync()
        except BaseException:
            self.close()
            raise

    # -- the stream ------------------------------------------------------------------------

    def _requests(self) -> Iterator[Any]:
        """The stream's requests, until `close` puts None. gRPC's request thread runs this
        generator: it notes which thread that is, for `close` to wait for it."""
        self._sender = threading.current_thread()
        self._sender_known.set()
        yield from iter(self._out.get, None)

    def _on_call_done(self, _call: Any) -> None:
        """Done callback of the stream: gRPC runs it on the channel's poller thread, after the
        call's last event, i.e. once that thread no longer takes the call's lock."""
        self._poller = threading.current_thread()
        self._call_done.set()

    def _pump(self) -> None:
        try:
            for msg in self._call:
                with self._cond:
                    for update in msg.updates:
                        self._apply(update)
                    if msg.HasField("sync"):
                        self._synced.add(msg.sync.id)
                    self._cond.notify_all()
            reason = "the coordinator closed the stream"
        except grpc.RpcError as exc:
            reason = f"{exc.code().name}: {exc.details()}"
        except Exception as exc:  # the thread must end and say why
            reason = repr(exc)
        with self._cond:
            self._dead = reason
            self._cond.notify_all()

    def _apply(self, update: Any) -> None:
        kind = update.WhichOneof("kind")
        if kind == "resource":
            p = update.resource.path
            self.resources[(p.exporter_name, p.group_name, p.resource_name)] = ResourceEntry(
                ResourceEntry.data_from_pb2(update.resource)
            )
        elif kind == "del_resource":
            p = update.del_resource
            self.resources.pop((p.exporter_name, p.group_name, p.resource_name), None)
        elif kind == "place":
            self.places[update.place.name] = Place.from_pb2(update.place)
        elif kind == "del_place":
            self.places.pop(update.del_place, None)

    def _unreachable(self, why: str) -> XrtError:
        return XrtError(
            ErrorCode.DEVICE_INTERNAL,
            f"labgrid coordinator {self.address}: {why} (is labgrid-coordinator running there? "
            "set LG_COORDINATOR or ?coordinator=HOST:PORT)",
        )

    def sync(self) -> None:
        """Wait until the coordinator has sent everything it had before this call."""
        ident = next(self._ids)
        msg = lg_pb.ClientInMessage()
        msg.sync.id = ident
        self._out.put(msg)
        self.wait_for(lambda: ident in self._synced, self.timeout_s, f"sync {ident}")

    def wait_for(self, predicate: Any, timeout_s: float, what: str) -> None:
        """Wait (on the mirror's updates) until `predicate()` holds.

        Raises:
            XrtError: 11015 after `timeout_s`, 11014 when the stream to the coordinator ended.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate():
                if self._dead is not None:
                    raise self._unreachable(self._dead)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise XrtError(
                        ErrorCode.TIMEOUT,
                        f"labgrid coordinator {self.address}: {what} not done in {timeout_s} s",
                    )
                self._cond.wait(left)

    def _unary(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            code = exc.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise self._unreachable(f"{method}: {exc.details()}") from None
            raise XrtError(
                ErrorCode.WRONG_ORDER, f"labgrid {method}: {exc.details()} [{code.name}]"
            ) from None

    def close(self) -> None:
        """End the session (what this user holds stays held: labgrid's locks outlive it).

        Returns once every thread of the session has ended (within `timeout_s`; a thread
        left running is logged). gRPC's request and poller threads are daemons that run
        Python code under the call's lock after the call is cancelled; in a process that
        exits meanwhile, the interpreter kills such a thread where it stands and its
        finalizer then collects the call (kept in a reference cycle by its own traceback),
        whose ``__del__`` takes that lock: the process never exits (issue 38, finding 9).
        """
        self._call.cancel()  # first: the request thread then has nothing left to send
        self._out.put(None)  # ends `_requests`: the request thread returns
        deadline = time.monotonic() + self.timeout_s

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        if self._sender_known.wait(left()) and self._sender is not None:
            self._sender.join(left())
        self._channel.close()  # returns once the call's events are in, not handled
        self._reader.join(left())
        poller = self._poller if self._call_done.wait(left()) else None
        if poller is not None and poller is not threading.current_thread():
            poller.join(left())  # it ends with the channel's last call: this one
        running = [
            t.name
            for t in (self._sender, self._reader, poller)
            if t is not None and t.is_alive() and t is not threading.current_thread()
        ]
        if running or not self._call_done.is_set():
            log.warning(
                "labgrid coordinator %s: session closed with %s still running after %.1f s",
                self.address,
                ", ".join(running) or "the stream's poller",
                self.timeout_s,
            )

    def __enter__(self) -> FarmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- places and devices ----------------------------------------------------------------

    def place(self, pattern: str) -> Place:
        """The place named `pattern` (exactly, or an alias); ``+`` or ``+TOKEN``: the place
        allocated to the reservation ``$LG_TOKEN`` (or TOKEN), as labgrid-client reads it.

        Raises:
            XrtError: 11002 when nothing matches (the message lists the places).
        """
        with self._cond:
            if pattern.startswith("+"):
                token = pattern[1:] or os.environ.get("LG_TOKEN", "")
                if not token:
                    raise XrtError(
                        ErrorCode.FILE_NOT_FOUND,
                        f"place {pattern!r} means the reservation in LG_TOKEN, which is not set",
                    )
                for place in self.places.values():
                    if place.reservation == token:
                        return place
                raise XrtError(
                    ErrorCode.FILE_NOT_FOUND,
                    f"no place is allocated to reservation {token} on {self.address} "
                    "(still waiting, cancelled or expired?)",
                )
            place = self.places.get(pattern)
            if place is None:
                place = next((p for p in self.places.values() if pattern in p.aliases), None)
            if place is None:
                raise XrtError(
                    ErrorCode.FILE_NOT_FOUND,
                    f"no place {pattern!r} on {self.address} "
                    f"(places: {', '.join(sorted(self.places)) or 'none'})",
                )
            return place

    def snapshot_places(self) -> list[Place]:
        """The places as mirrored now."""
        with self._cond:
            return list(self.places.values())

    def devices(self) -> list[FarmDevice]:
        """Every exported emulated NPU."""
        with self._cond:
            return [
                FarmDevice.from_entry((e, g, entry.cls, n), entry)
                for (e, g, n), entry in sorted(self.resources.items())
                if entry.cls == RESOURCE_CLASS
            ]

    def extra(self, device: FarmDevice) -> dict[str, Any]:
        """The information the exporter publishes beside a device's parameters: ``state``
        (``free``, ``leased``, ...), ``holder``, ``reason`` (why unavailable)."""
        with self._cond:
            entry = self.resources.get((device.path[0], device.path[1], device.path[3]))
            return dict(entry.extra) if entry is not None else {}

    def place_devices(self, place: Place) -> list[FarmDevice]:
        """The emulated NPUs a place holds (acquired) or would hold (matched, not acquired)."""
        with self._cond:
            out = []
            for (e, g, n), entry in sorted(self.resources.items()):
                if entry.cls != RESOURCE_CLASS:
                    continue
                path = (e, g, entry.cls, n)
                held = [tuple(p) for p in place.acquired_resources]
                if (place.acquired and path in held) or (
                    not place.acquired and place.hasmatch(path)
                ):
                    out.append(FarmDevice.from_entry(path, entry))
            return out

    def held_device(self, pattern: str, name: str | None = None) -> tuple[Place, FarmDevice]:
        """The NPU of the place `pattern` that this user has acquired.

        Raises:
            XrtError: 11012 when the place is not acquired by this user (never acquires it);
                11002 when it holds no (or no such) NpuEmuDevice; 11014 when the device is
                unavailable (its server is down, or it is leased outside the farm).
        """
        place = self.place(pattern)
        if not place.acquired:
            hint = f"labgrid-client -p {place.name} acquire"
            if place.reservation:
                hint = f"LG_TOKEN={place.reservation} labgrid-client -p + acquire"
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"labgrid place {place.name} is not acquired: acquire it first ({hint}); "
                "labgrid:// never acquires by itself",
            )
        if place.acquired != self.user and self.user not in place.allowed:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"labgrid place {place.name} is acquired by {place.acquired}, not by {self.user}",
            )
        devices = self.place_devices(place)
        if name is not None:
            devices = [d for d in devices if name in (d.path[3], d.device)]
        if len(devices) != 1:
            what = "no" if not devices else f"{len(devices)}"
            raise XrtError(
                ErrorCode.FILE_NOT_FOUND,
                f"labgrid place {place.name} holds {what} {RESOURCE_CLASS}"
                f"{' named ' + repr(name) if name else ''} (has: "
                f"{', '.join('/'.join(d.path) for d in self.place_devices(place)) or 'none'})"
                f"{'; pick one with ?name=' if len(devices) > 1 else ''}",
            )
        device = devices[0]
        if not device.avail:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"labgrid place {place.name}: device {device.where} is unavailable (its server "
                "is not serving, or the device is leased outside the farm)",
            )
        return place, device

    # -- reservations, acquire, release ----------------------------------------------------

    def reserve(self, tags: dict[str, str], *, prio: float = 0.0) -> str:
        """Create a reservation for a place whose tags include `tags`; returns its token."""
        request = lg_pb.CreateReservationRequest(
            filters={"main": lg_pb.Reservation.Filter(filter=tags)}, prio=prio
        )
        return self._unary("CreateReservation", request).reservation.token

    def poll_reservation(self, token: str) -> Reservation:
        """The reservation's state (polling also keeps it from expiring)."""
        resp = self._unary("PollReservation", lg_pb.PollReservationRequest(token=token))
        return Reservation.from_pb2(resp.reservation)

    def reservations(self) -> list[Reservation]:
        resp = self._unary("GetReservations", lg_pb.GetReservationsRequest())
        return [Reservation.from_pb2(r) for r in resp.reservations]

    def wait_reservation(self, token: str, timeout_s: float) -> str:
        """Wait until the reservation is allocated; returns the place's name.

        Waits on the places the coordinator publishes (it publishes a place when it
        allocates it), polling the reservation each second to keep it alive.

        Raises:
            XrtError: 11015 after `timeout_s`; 11012 when the reservation is gone.
        """
        deadline = time.monotonic() + timeout_s

        def allocated() -> bool:
            return any(p.reservation == token for p in self.places.values())

        while True:
            res = self.poll_reservation(token)
            if res.state.name not in ("waiting", "allocated", "acquired"):
                raise XrtError(ErrorCode.WRONG_ORDER, f"reservation {token} is {res.state.name}")
            if res.allocations:
                return res.allocations["main"][0]
            left = deadline - time.monotonic()
            if left <= 0:
                raise XrtError(
                    ErrorCode.TIMEOUT,
                    f"reservation {token} ({res.filters.get('main')}) got no place in "
                    f"{timeout_s} s",
                )
            try:  # the coordinator publishes the place it allocates: wake on that
                self.wait_for(allocated, min(1.0, left), "allocation")
            except XrtError as exc:
                if exc.code != ErrorCode.TIMEOUT:
                    raise

    def acquire(self, place: str) -> None:
        """Acquire `place` (labgrid's lock) and wait until the mirror shows it held."""
        self._unary("AcquirePlace", lg_pb.AcquirePlaceRequest(placename=place))
        self.sync()

    def release(self, place: str, *, from_user: str | None = None) -> None:
        """Release `place`; with `from_user`, only if that user still holds it."""
        request = lg_pb.ReleasePlaceRequest(placename=place)
        if from_user is not None:
            request.fromuser = from_user
        self._unary("ReleasePlace", request)
        self.sync()

    def cancel(self, token: str) -> None:
        """Cancel a reservation (no error when it is already gone)."""
        try:
            self._unary("CancelReservation", lg_pb.CancelReservationRequest(token=token))
        except XrtError as exc:
            if "does not exist" not in str(exc):
                raise


def _device_url(device: FarmDevice, url: DeviceURL, place: str) -> str:
    """The ``grpc://`` URL of `device`, carrying the other parameters of `url`."""
    params = {k: str(v) for k, v in url.params.items() if k not in URL_PARAMS}
    params.setdefault("client", f"labgrid:{place}:{farm_user()}:{os.getpid()}")
    query = urlencode(params, quote_via=quote)
    return f"{device.grpc_url}?{query}" if query else device.grpc_url


def open_labgrid(url: DeviceURL) -> Any:
    """Factory of ``labgrid://`` URLs (see the module docstring)."""
    place = urlsplit(url.raw.strip()).netloc  # not url.host: that one is lower-cased
    if not place:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"device URL {url.raw!r} needs a place: labgrid://PLACE or labgrid://+",
        )
    coordinator = url.params.get("coordinator")
    name = url.params.get("name")
    with FarmClient(None if coordinator is None else str(coordinator)) as client:
        held, device = client.held_device(place, None if name is None else str(name))
    return Device.open(_device_url(device, url, held.name))


def iter_places(client: FarmClient) -> Iterator[tuple[Place, list[FarmDevice]]]:
    """Each place with its emulated NPUs (for the reaper and `npu-emu-farm status`)."""
    for place in client.snapshot_places():
        yield place, client.place_devices(place)
