"""``npu-emu-farm export``: labgrid's exporter for the devices of a running ``npu-emu serve``.

It asks the server for its devices (``ListDevices``) and exports each one as an
``NpuEmuDevice`` resource in a group named after the device (a place matches
``EXPORTER/npu0/NpuEmuDevice``), then runs labgrid's own exporter with one addition: an
export class for ``NpuEmuDevice`` whose availability is real. labgrid exports a class it
does not know as always available, and its scheduler hands such a resource out whatever
its server does; here a resource is available only while:

- the server answers its health check with SERVING, and lists the device;
- the device is ready (not starting, restarting), and not leased outside the farm (leased
  while its place is not acquired).

The coordinator refuses to acquire a place whose device is unavailable: the exporter
answers the acquire request with the reason, so a job fails at once instead of being
handed a dead server's device. The device's lease state (``free``, ``leased``, ...) and
holder are published in the resource's ``extra`` information, where the reaper reads them.

One monitor thread asks the server every `--interval` seconds (a health check and a
``ListDevices``: two unary calls); labgrid's exporter polls the export objects every
0.25 s and sends the coordinator only what changed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from socket import gethostname
from typing import Any

import attr
import grpc
import labgrid.remote.exporter as lg_exporter
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from xrt.cli_device import DEFAULT_SERVER_URL, add_device_option, device_from_args
from xrt.errors import XrtError
from xrt.farm import RESOURCE_CLASS, coordinator_address
from xrt.hw.wire import pb, pb_grpc
from xrt.transport.grpc.channel import parse_url

__all__ = ["NpuEmuDeviceExport", "ServerMonitor", "add_arguments", "run"]

log = logging.getLogger("npuemu.farm.exporter")

_READY_STATES = {"FREE", "LEASED", "RESETTING"}


@dataclass
class DeviceStatus:
    """What the monitor last saw of one device."""

    avail: bool
    state: str  # "free", "leased", ..., or "unknown" when the server did not answer
    holder: str
    reason: str  # why unavailable ('' when available)


@dataclass
class ServerMonitor:
    """Polls one ``npu-emu serve`` in a thread; `status(device)` is the latest view."""

    address: str
    interval_s: float = 0.5
    timeout_s: float = 2.0
    _seen: dict[str, tuple[str, str]] = field(default_factory=dict)
    _down: str = "not asked yet"
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        token = os.environ.get("NPU_EMU_TOKEN")
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = grpc.insecure_channel(self.address)
        self._devices = pb_grpc.DeviceServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._thread = threading.Thread(target=self._run, name="npu-emu-monitor", daemon=True)

    def list_devices(self) -> list[Any]:
        """One ``ListDevices`` (raises grpc.RpcError)."""
        resp = self._devices.ListDevices(
            pb.ListDevicesRequest(), timeout=self.timeout_s, metadata=self._metadata
        )
        return list(resp.devices)

    def poll_once(self) -> None:
        try:
            health = self._health.Check(
                health_pb2.HealthCheckRequest(service=""), timeout=self.timeout_s
            )
            if health.status != health_pb2.HealthCheckResponse.SERVING:
                raise RuntimeError(
                    f"health {health_pb2.HealthCheckResponse.ServingStatus.Name(health.status)}"
                )
            devices = self.list_devices()
            seen = {
                d.name: (pb.DeviceState.Name(d.state).removeprefix("DEVICE_STATE_"), d.holder)
                for d in devices
            }
            down = ""
        except grpc.RpcError as exc:
            seen, down = {}, f"server {self.address} does not answer ({exc.code().name})"
        except RuntimeError as exc:
            seen, down = {}, f"server {self.address} is not serving ({exc})"
        with self._lock:
            if down != self._down:
                log.info("%s", down or f"server {self.address} serves {sorted(seen)}")
            self._seen, self._down = seen, down

    def status(self, device: str, acquired: bool) -> DeviceStatus:
        with self._lock:
            down, seen = self._down, self._seen.get(device)
        if down:
            return DeviceStatus(False, "unknown", "", down)
        if seen is None:
            return DeviceStatus(False, "unknown", "", f"server {self.address} has no {device}")
        state, holder = seen
        if state not in _READY_STATES:
            return DeviceStatus(False, state.lower(), holder, f"{device} is {state.lower()}")
        if state == "LEASED" and not acquired:
            return DeviceStatus(
                False, "leased", holder, f"{device} is leased outside the farm by {holder}"
            )
        return DeviceStatus(True, state.lower(), holder, "")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self.poll_once()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._channel.close()


_monitors: dict[str, ServerMonitor] = {}  # by server address: the export objects find theirs


@attr.s(eq=False)
class _Local:
    """What labgrid's ResourceExport expects in ``.local``: ``avail`` and ``poll()``."""

    export: NpuEmuDeviceExport = attr.ib()
    avail: bool = attr.ib(default=False)
    status: DeviceStatus | None = attr.ib(default=None)

    def poll(self, *, fresh: bool = False) -> None:
        params = self.export.local_params
        monitor = _monitors[f"{params['address']}:{params['port']}"]
        if fresh:  # decide an acquire on the server's state now, not as of the last look
            monitor.poll_once()
        self.status = monitor.status(params["device"], bool(self.export.acquired))
        self.avail = self.status.avail


@attr.s(eq=False)
class NpuEmuDeviceExport(lg_exporter.ResourceExport):
    """labgrid export of one ``NpuEmuDevice`` with real availability (module docstring)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.local = _Local(self)

    def _get_params(self) -> dict[str, Any]:
        status = self.local.status
        extra: dict[str, Any] = {}
        if status is not None:
            extra = {"state": status.state, "holder": status.holder, "reason": status.reason}
        return {**self.local_params, "extra": extra}

    def acquire(self, *args: Any, **kwargs: Any) -> None:
        self.local.poll(fresh=True)
        if not self.local.avail:
            reason = self.local.status.reason if self.local.status else "not polled yet"
            raise lg_exporter.InvalidResourceRequestError(
                f"{RESOURCE_CLASS} {self.local_params['device']} is unavailable: {reason}"
            )
        super().acquire(*args, **kwargs)


lg_exporter.exports[RESOURCE_CLASS] = NpuEmuDeviceExport


def resource_config(
    monitor: ServerMonitor, advertise: str, port: int, wait_s: float
) -> dict[str, Any]:
    """The exporter's resource configuration: one group per device of the server."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            devices = monitor.list_devices()
            break
        except grpc.RpcError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"npu-emu-farm export: server {monitor.address} did not answer in "
                    f"{wait_s} s ({exc.code().name}: {exc.details()})"
                ) from None
            time.sleep(0.5)
    return {
        d.name: {
            RESOURCE_CLASS: {
                "address": advertise,
                "port": port,
                "device": d.name,
                "npu_target": d.target,
            }
        }
        for d in devices
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_device_option(
        p,
        help="the local npu-emu serve, grpc://HOST:PORT (default $XRT_DEVICE, else "
        "grpc://127.0.0.1:50051)",
        legacy_server=True,
    )
    p.add_argument(
        "--advertise",
        default=None,
        help="host name or address clients use to reach the server (default: --device's host)",
    )
    p.add_argument(
        "-c",
        "--coordinator",
        default=None,
        help="labgrid coordinator HOST:PORT (default $LG_COORDINATOR, else 127.0.0.1:20408)",
    )
    p.add_argument("-n", "--name", default=None, help="exporter name (default: host name)")
    p.add_argument(
        "--interval", type=float, default=0.5, help="seconds between looks at the server"
    )
    p.add_argument(
        "--wait", type=float, default=60.0, help="seconds to wait for the server at start"
    )


def run(args: argparse.Namespace) -> int:
    """Run the exporter until SIGTERM/SIGINT (or the coordinator goes away: exit 100,
    as labgrid's exporter does, for systemd to restart it)."""
    try:
        url = device_from_args(args, "npu-emu-farm export", schemes=("grpc",), server_default=True)
        address = parse_url(url or DEFAULT_SERVER_URL).address
    except XrtError as exc:
        print(f"npu-emu-farm export: {exc.message}", file=sys.stderr)
        return 2
    host, _, port = address.rpartition(":")
    monitor = ServerMonitor(address, interval_s=args.interval)
    config = resource_config(monitor, args.advertise or host, int(port), args.wait)
    _monitors[f"{args.advertise or host}:{port}"] = monitor
    monitor.start()
    name = args.name or gethostname()
    with tempfile.TemporaryDirectory(prefix="npu-emu-export-") as tmp:
        path = Path(tmp) / "resources.yaml"
        path.write_text(yaml.safe_dump(config))
        print(
            f"npu-emu-farm export: {name} exports {', '.join(sorted(config))} of "
            f"{address} to {coordinator_address(args.coordinator)}",
            flush=True,
        )
        lg_exporter.inspect = None  # set by labgrid's own main(); amain reads it
        lg_exporter.reexec = False
        try:
            asyncio.run(
                lg_exporter.amain(
                    {
                        "name": name,
                        "hostname": args.advertise or host,
                        "resources": str(path),
                        "coordinator": coordinator_address(args.coordinator),
                        "isolated": False,
                    }
                )
            )
        finally:
            monitor.stop()
    return 100 if lg_exporter.reexec else 0
