"""`npu-emu serve`: build the model, start the workers, serve gRPC, stop cleanly.

Start-up: the verilated model is built (or found in the cache), the gRPC server starts
(health NOT_SERVING), the device workers start in parallel, then health turns SERVING and
one line on stdout says where: ``npu-emu: serving 1 buyi device(s) on 127.0.0.1:50051``.

Shut-down (SIGTERM or SIGINT): health NOT_SERVING first, then the server stops accepting
calls and gives in-flight ones a grace period, the workers quit (or are killed), and the
shared-memory files are removed: nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import sys
import time
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from npuemu.server.auth import TokenAuthInterceptor
from npuemu.server.devices import DeviceManager, SimDevice
from npuemu.server.security import TlsFiles
from npuemu.server.service import DeviceService, add_to_server
from npuemu.server.shm import new_server_dir, remove_stale_dirs
from npuemu.sim.build import build_npu_sim
from xrt._proto.npuemu.v1 import device_pb2
from xrt.hwconfig import target

__all__ = ["ServeOptions", "serve"]

log = logging.getLogger("npuemu.server")

SERVICE_NAME = device_pb2.DESCRIPTOR.services_by_name["DeviceService"].full_name
GRACE_S = 5.0  # calls in flight at shutdown get this long, then they are cancelled
DRAIN_S = 1.0  # health NOT_SERVING this long before calls are refused


def device_health_name(device: str) -> str:
    """Health service name of one device: NOT_SERVING while its worker cannot restart."""
    return f"{SERVICE_NAME}/{device}"


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 50051
    target: str = "buyi"
    devices: int = 1
    token: str | None = None
    lease_ttl_s: float = 30.0
    watchdog_s: float = 30.0
    tls: TlsFiles | None = None


async def serve(opts: ServeOptions) -> int:
    """Run the server until SIGTERM/SIGINT; return the exit status."""
    started = time.monotonic()
    cfg = target(opts.target)
    for stale in remove_stale_dirs():
        log.info("removed %s (left by a server that is gone)", stale)

    log.info("verilated model for %s: building or reusing the cached one ...", cfg.name)
    model = await asyncio.to_thread(build_npu_sim, cfg.name)
    log.info(
        "model %s %s (%.1f s)",
        model.build_dir.name,
        "built" if model.built_now else "from the cache",
        model.seconds,
    )

    folder = new_server_dir()
    manager = DeviceManager(cfg, model, opts.devices, folder, opts.lease_ttl_s, opts.watchdog_s)
    interceptors = [TokenAuthInterceptor(opts.token)] if opts.token else []
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", 8 << 20),
            ("grpc.max_send_message_length", 8 << 20),
            # A busy port is an error, not a port shared with another server that would
            # silently take some of the clients.
            ("grpc.so_reuseport", 0),
        ],
    )
    add_to_server(DeviceService(manager), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (
            SERVICE_NAME,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        server,
    )
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    try:
        where = f"{opts.host}:{opts.port}"
        if opts.tls is not None:
            port = server.add_secure_port(where, opts.tls.credentials())
        else:
            port = server.add_insecure_port(where)
    except RuntimeError as exc:
        log.error("cannot listen on %s:%d: %s", opts.host, opts.port, exc)
        shutil.rmtree(folder, ignore_errors=True)
        return 2
    await server.start()
    try:
        await manager.start()
    except Exception:
        log.exception("device workers failed to start")
        await server.stop(0)
        await manager.stop()
        shutil.rmtree(folder, ignore_errors=True)
        return 1
    for name in ("", SERVICE_NAME, *map(device_health_name, manager.devices)):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)

    def report_fault(device: SimDevice) -> None:
        status = health_pb2.HealthCheckResponse
        manager.spawn(
            health_servicer.set(
                device_health_name(device.name),
                status.NOT_SERVING if device.fault else status.SERVING,
            )
        )

    for device in manager.devices.values():
        device.on_fault = report_fault
    auth = "token required" if opts.token else "no token"
    if opts.tls is not None:
        auth += ", mutual TLS" if opts.tls.client_ca else ", TLS"
    print(
        f"npu-emu: serving {opts.devices} {cfg.name} device(s) on {opts.host}:{port} "
        f"({auth}; ready in {time.monotonic() - started:.1f} s)",
        flush=True,
    )

    await stop.wait()
    log.info(
        "shutting down: health NOT_SERVING, %.0f s drain, then %.0f s grace for calls in flight",
        DRAIN_S,
        GRACE_S,
    )
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    # Drain: load balancers and clients watching health see NOT_SERVING while calls are
    # still served; a second signal skips the wait.
    stop.clear()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), DRAIN_S)
    manager.closing.set()
    await server.stop(GRACE_S)  # then in-flight calls are cancelled (and so their requests)
    await manager.stop()
    shutil.rmtree(folder, ignore_errors=True)
    log.info("stopped")
    return 0


def run(opts: ServeOptions) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(serve(opts))
