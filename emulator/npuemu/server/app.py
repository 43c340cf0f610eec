"""`npu-emu serve`: build the model, start the workers, serve gRPC, stop cleanly.

Start-up: the verilated model is built (or found in the cache), the gRPC server starts
(health NOT_SERVING), the device workers start in parallel, then health turns SERVING and
one line on stdout says where: ``npu-emu: serving 1 buyi device(s) on 127.0.0.1:50051``.

Shut-down (SIGTERM or SIGINT): health NOT_SERVING first while calls are still served (the
drain window, `--drain`), then the server refuses new calls and gives those in flight a grace
period (`--shutdown-grace`); calls still running then are stopped in their workers and end
with UNAVAILABLE "the server is shutting down". The workers quit (or are killed), and the
shared-memory files are removed: nothing is left behind. Each further signal skips the
current wait (the second ends the drain window, the third the grace period).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from npuemu.process_guard import make_non_dumpable
from npuemu.server.auth import TokenAuthInterceptor
from npuemu.server.checkpoint import Checkpoint, CheckpointError, Limits
from npuemu.server.checkpoint_seal import SealKey, SealKeyError
from npuemu.server.devices import SimDevice
from npuemu.server.handlers import add_to_server
from npuemu.server.json_log import JsonLogFormatter
from npuemu.server.limits import HANDSHAKE_TIMEOUT_S, keepalive_options, plan_descriptors
from npuemu.server.local_handout import MAX_CLIENTS, LocalHandout
from npuemu.server.manager import DeviceManager
from npuemu.server.observer import ObserverDeviceService
from npuemu.server.recording import DEFAULT_KEEP_MIB, DEFAULT_MAX_MIB, RecordingFolder
from npuemu.server.security import TlsFiles
from npuemu.server.shm import new_server_dir, remove_stale_dirs
from npuemu.server.storage import (
    LogFolder,
    StartupError,
    choose_memory_dir,
    private_folder,
    write_port_file,
)
from npuemu.server.worker_process import WorkerError
from npuemu.sim.build import ModelBuildError, build_npu_sim
from npuemu.worker.config import WorkerConfig
from xrt.hw.config import TargetConfig
from xrt.hw.port import PortErrorCode
from xrt.hw.targets import target
from xrt.hw.wire import pb as device_pb2
from xrt.progress import progress
from xrt.regtrace import RegisterNamer, RegisterTraceLog

__all__ = ["ServeOptions", "serve"]

log = logging.getLogger("npuemu.server")

SERVICE_NAME = device_pb2.DESCRIPTOR.services_by_name["DeviceService"].full_name
GRACE_S = 5.0  # calls in flight at shutdown get this long, then they are stopped
DRAIN_S = 1.0  # health NOT_SERVING this long before calls are refused
FINAL_S = 0.5  # after the grace: for stopped calls to send their status, then cancelled


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
    # Storage, logs and debugging (issue 14): see npuemu.server.storage, npuemu.sim.waves.
    memory_dir: Path | None = None
    log_dir: Path | None = None
    log_level: str = "INFO"
    waves_dir: Path | None = None
    register_trace: Path | None = None
    lockstep: bool = False  # every launch checked against the golden model (npuemu.sim.lockstep)
    # The register path (WorkerConfig): the server's ring into the simulator, and which bus
    # master the simulation drives the registers with (benches compare them).
    server_ring: bool = True
    register_master: str = "regbus"
    warm: Path | None = None  # a checkpoint every lease starts from (npuemu.server.checkpoint)
    # Checkpoint seals (npuemu.server.checkpoint_seal): the key file (None: a key of this
    # process's own), and whether model states this server did not seal are restored too.
    checkpoint_key_file: Path | None = None
    allow_foreign_checkpoints: bool = False
    # Recordings of leases (npuemu.server.recording); None: nothing is recorded.
    record_dir: Path | None = None
    record_max_bytes: int = DEFAULT_MAX_MIB << 20
    record_keep_bytes: int = DEFAULT_KEEP_MIB << 20
    # Observers of held devices (npuemu.server.observer); None: observing is off.
    admin_token: str | None = None
    # Shutdown (see the module docstring).
    drain_s: float = DRAIN_S
    grace_s: float = GRACE_S
    port_file: Path | None = None  # the URL, written once the devices are ready
    # Observability: Prometheus /metrics on this port (0: any free one; None: off) and the
    # log lines' format ("text", or "json": one object per line for log collectors).
    metrics_port: int | None = None
    log_format: str = "text"


def load_warm(
    path: Path, cfg: TargetConfig, model_digest: str, key: SealKey, allow_foreign: bool
) -> Checkpoint:
    """The checkpoint of ``serve --warm``, checked against this server's devices: its model
    state must be sealed by this server's key (``--checkpoint-key-file``) unless the
    server restores foreign checkpoints."""
    limits = Limits.for_target(cfg)
    try:
        with path.open("rb") as f:
            data = f.read(limits.max_file_bytes() + 1)
    except OSError as exc:
        raise CheckpointError(f"cannot read it: {exc.strerror}") from None
    if len(data) > limits.max_file_bytes():
        raise CheckpointError(
            f"it is larger than a {cfg.name} checkpoint can be ({limits.max_file_bytes()} bytes)"
        )
    warm = Checkpoint.parse(data, limits)
    why = None if allow_foreign else warm.authenticate(key)
    if why is not None:
        raise CheckpointError(
            f"its model state {why}: start the server with the key of the server that took "
            "it (--checkpoint-key-file), or with --allow-foreign-checkpoints if you trust "
            "the file"
        )
    warm.check_fits(cfg, model_digest)
    return warm


async def serve(opts: ServeOptions) -> int:
    """Run the server until SIGTERM/SIGINT; return the exit status."""
    started = time.monotonic()
    make_non_dumpable()  # same-user processes cannot take the memory files out of it
    cfg = target(opts.target)
    try:
        memory_root, warning = choose_memory_dir(opts.memory_dir, cfg, opts.devices)
    except StartupError as exc:
        log.error("%s", exc)
        return 2
    if warning:
        log.warning("%s", warning)
    # Recordings and waveform windows hold the holders' data: private folders (0700).
    for flag, named in (("--waves", opts.waves_dir), ("--record", opts.record_dir)):
        try:
            warning = private_folder(named, flag) if named is not None else ""
        except StartupError as exc:
            log.error("%s", exc)
            return 2
        if warning:
            log.warning("%s", warning)
    for stale in remove_stale_dirs(memory_root):
        log.info("removed %s (left by a server that is gone)", stale)

    waves = opts.waves_dir is not None
    # A recording server runs the traced model (no cost while no window is open,
    # docs/performance.md): its recordings' checkpoints then fit the model a replay with
    # --waves needs, so a late window starts from the nearest one (npuemu.replay_waves).
    traced = waves or opts.record_dir is not None
    log.info("verilated model for %s: building or reusing the cached one ...", cfg.name)
    try:
        model = await asyncio.to_thread(build_npu_sim, cfg.name, waves=traced)
    except ModelBuildError as exc:
        log.error("%s", exc)
        return 1
    log.info(
        "model %s %s (%.1f s)",
        model.build_dir.name,
        "built" if model.built_now else "from the cache",
        model.seconds,
    )

    try:
        key = (
            SealKey.from_file(opts.checkpoint_key_file)
            if opts.checkpoint_key_file is not None
            else SealKey.generate()
        )
    except SealKeyError as exc:
        log.error("%s", exc)
        return 2
    warm = None
    if opts.warm is not None:  # checked before any folder or worker exists
        try:
            warm = await asyncio.to_thread(
                load_warm, opts.warm, cfg, model.digest, key, opts.allow_foreign_checkpoints
            )
        except CheckpointError as exc:
            log.error("--warm %s: %s", opts.warm, exc)
            return 2

    fd_limit, connections = plan_descriptors(opts.devices, MAX_CLIENTS)
    log.info("open-file limit %d: at most %d client connections", fd_limit, connections)
    logs = LogFolder.create(opts.log_dir)
    print(f"npu-emu: worker logs in {logs.path}", flush=True)
    if opts.waves_dir is not None:
        print(f"npu-emu: waveform windows go to {opts.waves_dir.resolve()}", flush=True)
    recordings = None
    if opts.record_dir is not None:
        try:
            recordings = RecordingFolder(
                opts.record_dir.resolve(), opts.record_max_bytes, opts.record_keep_bytes
            )
        except OSError as exc:
            log.error("cannot record into %s: %s", opts.record_dir, exc)
            logs.finish(crashed=False)
            return 2
        print(f"npu-emu: recording every lease into {recordings.folder}", flush=True)
    if opts.lockstep:
        print("npu-emu: every launch is checked against the golden model (--lockstep)", flush=True)
    # The workers' taps: a recording or a register trace gets every request served, through
    # whatever route (the worker's port runs the rings' requests itself then); lockstep
    # checks every launch there.
    worker_config = WorkerConfig(
        waves_dir=str(opts.waves_dir.resolve()) if opts.waves_dir is not None else "",
        lockstep=opts.lockstep,
        taps=recordings is not None or opts.register_trace is not None,
        server_ring=opts.server_ring,
        reg_master=opts.register_master,
    )
    folder = new_server_dir(memory_root)
    manager = DeviceManager(
        cfg,
        model,
        opts.devices,
        folder,
        opts.lease_ttl_s,
        opts.watchdog_s,
        log_dir=logs.path,
        worker_config=worker_config,
    )
    if warm is not None:
        for device in manager.devices.values():
            device.warm = warm
        log.info("every lease starts from the state of %s (cycle %d)", opts.warm, warm.cycle)
    manager.recordings = recordings
    manager.seal_key = key
    manager.allow_foreign_checkpoints = opts.allow_foreign_checkpoints
    log.info(
        "checkpoints are sealed with key %s (%s)%s",
        key.key_id,
        key.origin,
        "; foreign model states are restored too" if opts.allow_foreign_checkpoints else "",
    )
    if opts.register_trace is not None:
        trace = RegisterTraceLog(opts.register_trace, RegisterNamer.for_target(cfg.name))
        for device in manager.devices.values():
            device.register_trace = trace
        log.info("register accesses are logged to %s", opts.register_trace)
    interceptors: list[grpc.aio.ServerInterceptor] = []
    metrics = None
    if opts.metrics_port is not None:
        from npuemu.server.metrics import MetricsInterceptor, ServerMetrics

        metrics = ServerMetrics()
        metrics.watch_devices(lambda: manager.devices.values(), model)
        manager.metrics = metrics
        interceptors.append(MetricsInterceptor(metrics))  # first: it counts refused calls too
    if opts.token:
        interceptors.append(TokenAuthInterceptor(opts.token))
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", 8 << 20),
            ("grpc.max_send_message_length", 8 << 20),
            # A busy port is an error, not a port shared with another server that would
            # silently take some of the clients.
            ("grpc.so_reuseport", 0),
            # Bounded connections: a flood of idle ones cannot take every descriptor.
            ("grpc.max_allowed_incoming_connections", connections),
            ("grpc.server_handshake_timeout_ms", int(HANDSHAKE_TIMEOUT_S * 1000)),
            # A peer that stops answering (stopped, gone without a FIN) loses its
            # connection, and so its HoldLease stream and lease, whatever its version.
            *keepalive_options(opts.lease_ttl_s),
        ],
    )
    add_to_server(ObserverDeviceService(manager, waves, opts.admin_token), server)
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
        logs.finish(crashed=False)  # nothing ran: leave no empty log folder behind
        return 2
    if metrics is not None:
        try:
            metrics_port = metrics.serve(opts.host, opts.metrics_port or 0)
        except OSError as exc:
            log.error(
                "--metrics-port %s: cannot listen on %s: %s",
                opts.metrics_port,
                opts.host,
                exc.strerror,
            )
            shutil.rmtree(folder, ignore_errors=True)
            logs.finish(crashed=False)
            return 2
        shown = f"[{opts.host}]" if ":" in opts.host else opts.host
        print(f"npu-emu: metrics on http://{shown}:{metrics_port}/metrics", flush=True)
    await server.start()
    manager.device_log.attach()
    handout = LocalHandout(folder, manager)
    try:
        await handout.start()
        with progress(f"starting {opts.devices} simulation worker(s)"):
            await manager.start()
    except Exception as exc:
        bad_warm = isinstance(exc, WorkerError) and exc.code == PortErrorCode.BAD_STATE
        if isinstance(exc, WorkerError) and bad_warm:  # the operator's file, not our fault
            log.error("--warm %s: the worker refused its model state: %s", opts.warm, exc.detail)
        else:
            log.exception("device workers failed to start (their logs: %s)", logs.path)
        await server.stop(0)
        await handout.stop()
        await manager.stop()
        shutil.rmtree(folder, ignore_errors=True)
        logs.finish(crashed=not bad_warm)
        return 2 if bad_warm else 1
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
    if opts.admin_token:
        auth += ", observers with the admin token"
    print(
        f"npu-emu: serving {opts.devices} {cfg.name} device(s) on {opts.host}:{port} "
        f"({auth}; ready in {time.monotonic() - started:.1f} s)",
        flush=True,
    )

    scheme = "grpcs" if opts.tls is not None else "grpc"
    host = f"[{opts.host}]" if ":" in opts.host else opts.host
    port_file = None
    if opts.port_file is not None:
        try:
            port_file = write_port_file(opts.port_file, f"{scheme}://{host}:{port}")
        except OSError as exc:
            log.error("--port-file %s: %s", opts.port_file, exc)
            stop.set()

    await stop.wait()
    if port_file is not None:
        port_file.remove()
    await _shut_down(server, manager, health_servicer, stop, opts)  # workers stopped too
    await handout.stop()
    if recordings is not None:
        recordings.close_all("the server shut down")
    shutil.rmtree(folder, ignore_errors=True)
    crashed = any(d.counters.worker_restarts for d in manager.devices.values())
    if logs.finish(crashed):
        log.info("worker logs kept in %s", logs.path)
    manager.device_log.detach()
    if metrics is not None:
        metrics.close()
    log.info("stopped")
    return 0


async def _wait_or_signal(
    stop: asyncio.Event, seconds: float, task: asyncio.Future[None] | None = None
) -> None:
    """Wait `seconds`, or less when `stop` is set (another signal) or `task` ends."""
    stop.clear()
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop.wait())]
    if task is not None:
        waits.append(task)
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waits[0].cancel()


async def _shut_down(
    server: grpc.aio.Server,
    manager: DeviceManager,
    health_servicer: health.aio.HealthServicer,
    stop: asyncio.Event,
    opts: ServeOptions,
) -> None:
    """Drain window, then refuse new calls, then the grace for calls in flight; then the
    calls still running are stopped in their workers and end with a clear status, while the
    workers quit and streams still open (a health Watch) get `FINAL_S` before they are
    cancelled. The whole takes drain + grace + about a second."""
    log.info(
        "shutting down: health NOT_SERVING, %.0f s drain, then %.0f s grace for calls in flight",
        opts.drain_s,
        opts.grace_s,
    )
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    # Drain: load balancers and clients watching health see NOT_SERVING while calls are
    # still served; a second signal ends the window.
    if opts.drain_s > 0:
        await _wait_or_signal(stop, opts.drain_s)
    log.info("drain window over: refusing new calls")
    manager.closing.set()  # HoldLease streams end now
    # New calls are refused from here on; grpc cancels whatever still runs at the end.
    stopped = asyncio.ensure_future(server.stop(opts.grace_s + FINAL_S))
    await _wait_or_signal(stop, opts.grace_s, stopped)
    if not stopped.done():
        busy = manager.stop_calls()
        log.info("grace period over: stopping %d call(s) still running in the workers", busy)
        # Their statuses go out at once (each worker answers its stopped call before it
        # quits); streams still open (a health Watch, a stalled upload) are cancelled after
        # FINAL_S (the smaller grace of two stop() calls wins).
        await asyncio.gather(server.stop(FINAL_S), manager.stop())
        await stopped
    else:
        await manager.stop()


def run(opts: ServeOptions) -> int:
    handler = logging.StreamHandler(sys.stderr)
    if opts.log_format == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, opts.log_level.upper()), handlers=[handler])
    return asyncio.run(serve(opts))
