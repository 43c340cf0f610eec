"""Prometheus metrics of a server (``npu-emu serve --metrics-port PORT``).

Three sources, all in one registry of the server's own (never prometheus-client's global
one, so two servers in one process, as in the tests, do not collide):

- Requests by method and gRPC status, with their durations: `MetricsInterceptor`, a server
  interceptor installed only when metrics are on (no cost otherwise).
- Leases: opened, ended (by why), how long they were held, and the opens refused (a busy or
  starting device: the server has no queue, clients wait on their side and retry, so the
  refusals by reason are the queue's measure): `ServerMetrics.lease_*`, called by
  `npuemu.server.manager.DeviceManager`.
- The devices' state and counters (simulated cycle, register operations, memory bytes,
  worker restarts) and the model's build, read from the manager when scraped
  (`_DeviceCollector`), so the request path pays nothing for them.

No lease id and no holder name is ever a label: a scrape shows load, not who holds what.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from xrt.hw.wire import DeviceState

if TYPE_CHECKING:
    from npuemu.server.devices import SimDevice
    from npuemu.sim.build import BuiltModel

__all__ = ["MetricsInterceptor", "ServerMetrics"]

_PREFIX = "npuemu"
# Register batches and memory streams take micro- to milliseconds; waits and checkpoints
# seconds. Lease holds from a test's second to a long CI job's hour.
_REQUEST_BUCKETS = (0.0005, 0.002, 0.01, 0.05, 0.25, 1.0, 5.0, 30.0, 120.0)
_LEASE_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)


class _DeviceCollector(Collector):
    """The devices' state and counters, read at scrape time."""

    def __init__(self, devices: Callable[[], Iterable[SimDevice]], model: BuiltModel) -> None:
        self._devices = devices
        self._model = model

    def collect(self) -> Iterable[Metric]:
        devices = list(self._devices())
        states = GaugeMetricFamily(
            f"{_PREFIX}_devices", "Devices by state", labels=["target", "state"]
        )
        per_state: dict[tuple[str, str], int] = {}
        for d in devices:
            key = (d.target.name, d.state.name.lower())
            per_state[key] = per_state.get(key, 0) + 1
        for target in {d.target.name for d in devices}:
            for state in DeviceState:
                states.add_metric(
                    [target, state.name.lower()], per_state.get((target, state.name.lower()), 0)
                )
        yield states
        held = GaugeMetricFamily(f"{_PREFIX}_leases_held", "Leases held now")
        held.add_metric([], sum(1 for d in devices if d.lease is not None))
        yield held
        cycle = GaugeMetricFamily(
            f"{_PREFIX}_device_simulated_cycle",
            "The device's simulated cycle at its last reply (restarts at a worker restart)",
            labels=["device"],
        )
        families = {
            "requests": CounterMetricFamily(
                f"{_PREFIX}_device_requests",
                "Calls on the device by its holders",
                labels=["device"],
            ),
            "register_ops": CounterMetricFamily(
                f"{_PREFIX}_device_register_operations",
                "Register reads and writes served",
                labels=["device"],
            ),
            "memory_bytes_read": CounterMetricFamily(
                f"{_PREFIX}_device_memory_read_bytes", "Device memory bytes read", labels=["device"]
            ),
            "memory_bytes_written": CounterMetricFamily(
                f"{_PREFIX}_device_memory_written_bytes",
                "Device memory bytes written",
                labels=["device"],
            ),
            "worker_restarts": CounterMetricFamily(
                f"{_PREFIX}_worker_restarts", "Simulation worker restarts", labels=["device"]
            ),
            "observer_requests": CounterMetricFamily(
                f"{_PREFIX}_device_observer_requests", "Observe* calls", labels=["device"]
            ),
        }
        for d in devices:
            cycle.add_metric([d.name], d.counters.cycles)
            for field, family in families.items():
                family.add_metric([d.name], getattr(d.counters, field))
        yield cycle
        yield from families.values()
        build = GaugeMetricFamily(
            f"{_PREFIX}_model_build_seconds",
            "Seconds the server's verilated model took to build (0: it came from the cache)",
            labels=["model"],
        )
        build.add_metric([self._model.build_dir.name], self._model.seconds)
        yield build


class ServerMetrics:
    """The metrics of one server and the HTTP endpoint that serves them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            f"{_PREFIX}_requests",
            "gRPC calls by method and status",
            ["method", "code"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            f"{_PREFIX}_request_seconds",
            "gRPC call durations by method",
            ["method"],
            buckets=_REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.leases_opened = Counter(
            f"{_PREFIX}_leases_opened", "Leases granted", registry=self.registry
        )
        self.lease_ends = Counter(
            f"{_PREFIX}_lease_ends", "Leases ended, by why", ["reason"], registry=self.registry
        )
        self.lease_seconds = Histogram(
            f"{_PREFIX}_lease_seconds",
            "How long leases were held",
            buckets=_LEASE_BUCKETS,
            registry=self.registry,
        )
        self.opens_refused = Counter(
            f"{_PREFIX}_opens_refused",
            "OpenDevice refusals by reason (busy, starting, restarting, resetting): the "
            "clients wait and retry, so these are the server's queue",
            ["reason"],
            registry=self.registry,
        )
        self._http: Any = None

    def watch_devices(self, devices: Callable[[], Iterable[SimDevice]], model: BuiltModel) -> None:
        self.registry.register(_DeviceCollector(devices, model))

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on `host`:`port` (0: any free port); return the port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._http = server
        return int(server.server_port)

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    # Lease events, from the manager.
    def lease_opened(self) -> None:
        self.leases_opened.inc()

    def lease_ended(self, reason: str, held_s: float) -> None:
        self.lease_ends.labels(lease_end_kind(reason)).inc()
        self.lease_seconds.observe(held_s)

    def open_refused(self, reason: str) -> None:
        self.opens_refused.labels(reason or "other").inc()


def lease_end_kind(reason: str) -> str:
    """A bounded label for a lease's end reason (the reasons carry numbers and names):
    closed (by its holder), disconnected, expired (a silent holder) or other."""
    text = reason.lower()
    if "closed" in text:
        return "closed"
    if "disconnect" in text:
        return "disconnected"
    if any(word in text for word in ("keep-alive", "heartbeat", "never used")):
        return "expired"
    return "other"


def _code_of(context: grpc.aio.ServicerContext, default: grpc.StatusCode) -> str:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    return default.name


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts every call by method and status and times it."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        metrics = self._metrics

        def finish(
            context: grpc.aio.ServicerContext, start: float, failed: BaseException | None
        ) -> None:
            if failed is None:
                code = _code_of(context, grpc.StatusCode.OK)
            elif isinstance(failed, asyncio.CancelledError):
                code = grpc.StatusCode.CANCELLED.name
            else:
                code = _code_of(context, grpc.StatusCode.UNKNOWN)
            metrics.requests.labels(method, code).inc()
            metrics.request_seconds.labels(method).observe(time.perf_counter() - start)

        def unary_wrapper(inner: Callable[..., Any]) -> Callable[..., Any]:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
                start = time.perf_counter()
                try:
                    reply = await inner(request, context)
                except BaseException as exc:
                    finish(context, start, exc)
                    raise
                finish(context, start, None)
                return reply

            return call

        def stream_wrapper(inner: Callable[..., Any]) -> Callable[..., Any]:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                start = time.perf_counter()
                try:
                    replies = inner(request, context)
                    if inspect.isasyncgen(replies):
                        async for reply in replies:
                            yield reply
                    else:  # a handler that writes through context.write
                        await replies
                except BaseException as exc:
                    finish(context, start, exc)
                    raise
                finish(context, start, None)

            return call

        kinds = (
            ("unary_unary", grpc.unary_unary_rpc_method_handler, unary_wrapper),
            ("stream_unary", grpc.stream_unary_rpc_method_handler, unary_wrapper),
            ("unary_stream", grpc.unary_stream_rpc_method_handler, stream_wrapper),
            ("stream_stream", grpc.stream_stream_rpc_method_handler, stream_wrapper),
        )
        for attr, make, wrap in kinds:
            inner = getattr(handler, attr)
            if inner is not None:
                return make(
                    wrap(inner),
                    request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer,
                )
        return handler
