"""Following a device's log (``FollowDeviceLog``): the client side of device log capture
(`xrt.aic.Context(collect_device_logs=True)`). The server's lines about the device come as
they are; the device's own (an interrupt raised, an engine or DMA error, a reset) start
with ``[device, cycle N]``: the simulated device's cycle when the server's worker saw it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc

from xrt.hw.wire import pb
from xrt.transport.grpc.calls import DeviceClient

__all__ = ["DEVICE_LINE_PREFIX", "LogLineCallback", "follow_device_log"]

FIRST_RECORD_S = 10.0
"""How long `follow_device_log` waits for the stream's first record (the server says it
follows the device: every request from then on shows in the device's lines)."""

DEVICE_LINE_PREFIX = "[device"
"""How a line of the device's own begins: ``[device, cycle 18234] interrupt raised``."""

LogLineCallback = Callable[[int, str, str], None]
"""``callback(level, device, message)``; ``level`` as Python's logging levels."""


def follow_device_log(
    client: DeviceClient, lease_id: str, device: str, callback: LogLineCallback
) -> Callable[[], None]:
    """Stream the server's log lines about `device` to `callback` on a daemon thread until
    the lease ends or the returned function is called (it waits for the thread). Returns
    once the stream has its first record (the server follows the device from then on). A
    server that cannot stream (older than the RPC) gives one WARNING line through
    `callback`."""
    call = client.stub.FollowDeviceLog(
        pb.FollowDeviceLogRequest(lease_id=lease_id), metadata=client.metadata
    )

    started = threading.Event()  # the server's first record: it follows the device now

    def pump() -> None:
        try:
            for record in call:
                started.set()
                if record.dropped:
                    callback(30, device, f"{record.dropped} log line(s) dropped (slow reader)")
                message = record.message
                if record.source == pb.DEVICE_LOG_SOURCE_DEVICE:
                    message = f"{DEVICE_LINE_PREFIX}, cycle {record.cycle}] {message}"
                callback(record.level, device, message)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                callback(30, device, "this server cannot stream device logs (FollowDeviceLog)")
            elif exc.code() != grpc.StatusCode.CANCELLED:
                callback(30, device, f"device log stream ended: {exc.code().name}")
        except Exception:  # the thread must end quietly; the callback's errors are its own
            pass
        finally:
            started.set()

    thread = threading.Thread(target=pump, name=f"xrt-log-{device}", daemon=True)
    thread.start()
    started.wait(FIRST_RECORD_S)  # an older server sends none: then go on after a while

    def stop() -> None:
        call.cancel()
        thread.join(5.0)

    return stop
