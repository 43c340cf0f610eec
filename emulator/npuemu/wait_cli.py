"""``npu-emu wait --device URL --timeout S``: exit 0 once a device of the server can be
leased, `xrt.exitcodes.TIMED_OUT` (5) when none could be within the time.

For CI scripts that start a server and must not sleep: ``npu-emu serve --port 0 --port-file
F &``, then ``npu-emu wait --port-file F`` (waits for the file, then for a device), then
``--device "$(cat F)"``. With ``--device URL`` the server need not listen yet: a refused
connection is waited out too.
A device "can be leased" when the listing shows it free (for a URL naming one, that one);
nothing is leased to find out.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from xrt import exitcodes
from xrt.cli_output import report_error
from xrt.device_url import DEFAULT_DEVICE_ENV
from xrt.errors import XrtError

__all__ = ["POLL_S", "wait_for_device"]

POLL_S = 0.1
"""Between two looks at a server that answers but has no free device yet."""

_FATAL = ("UNAUTHENTICATED", "PERMISSION_DENIED", "UNIMPLEMENTED", "FAILED_PRECONDITION")


def wait_for_device(
    url: str | None,
    timeout_s: float,
    *,
    port_file: Path | None = None,
    quiet: bool = False,
    as_json: bool = False,
) -> int:
    """Wait up to `timeout_s` for a free device at `url` (default ``$XRT_DEVICE``), or at
    the URL `port_file` holds once it appears (``serve --port-file``); return the exit
    code (0, `TIMED_OUT`, `BAD_INPUT` for a bad URL or file or a device the server does
    not have, `FAILED` when the server refuses the listing); with `as_json`, the device
    found or the error as one JSON document on stdout."""

    def _fail(code: int, message: str) -> int:
        return report_error("npu-emu wait", code, message, as_json=as_json)

    import grpc

    from xrt.hw.wire import pb, pb_grpc
    from xrt.transport.grpc.channel import open_channel, parse_url

    if not timeout_s >= 0:
        return _fail(exitcodes.BAD_INPUT, f"--timeout must be zero or more, not {timeout_s}")
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()  # never set: an interruptible wait between two looks
    if port_file is not None:
        if url:
            return _fail(exitcodes.BAD_INPUT, "give --device or --port-file, not both")
        while not port_file.is_file() and time.monotonic() < deadline:
            pause.wait(POLL_S)
        try:
            url = port_file.read_text(errors="replace")[:4096].strip()
        except FileNotFoundError:
            return _fail(exitcodes.TIMED_OUT, f"no {port_file} within {timeout_s:g} s")
        except OSError as exc:
            return _fail(exitcodes.BAD_INPUT, f"--port-file {port_file}: {exc.strerror}")
    url = url or os.environ.get(DEFAULT_DEVICE_ENV, "").strip()
    if not url:
        return _fail(exitcodes.BAD_INPUT, f"--device URL is needed (or ${DEFAULT_DEVICE_ENV})")
    try:
        target = parse_url(url)
    except XrtError as exc:
        return _fail(exitcodes.BAD_INPUT, f"--device {url!r}: {exc.message}")
    token = target.token or os.environ.get("NPU_EMU_TOKEN") or None
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    last = "no answer yet"
    said = False
    with open_channel(target.address, target.tls) as channel:
        stub = pb_grpc.DeviceServiceStub(channel)
        while True:
            left = deadline - time.monotonic()
            try:
                listing = stub.ListDevices(
                    pb.ListDevicesRequest(),
                    timeout=max(min(left, 5.0), 0.05),
                    metadata=metadata,
                    wait_for_ready=True,  # a server not listening yet is waited for
                )
            except grpc.RpcError as exc:
                if exc.code().name in _FATAL:
                    return _fail(exitcodes.FAILED, f"{url}: {exc.code().name}: {exc.details()}")
                last = f"no answer ({exc.code().name})"
            else:
                names = [d.name for d in listing.devices]
                if target.device and target.device not in names:
                    return _fail(
                        exitcodes.BAD_INPUT,
                        f"{url}: the server has no device {target.device!r} "
                        f"(devices: {', '.join(names) or 'none'})",
                    )
                states = {
                    d.name: pb.DeviceState.Name(d.state).removeprefix("DEVICE_STATE_").lower()
                    for d in listing.devices
                    if not target.device or d.name == target.device
                }
                ready = [n for n, s in states.items() if s == "free"]
                if ready:
                    if as_json:
                        print(json.dumps({"device": url, "free": ready[0]}))
                    elif not quiet:
                        print(f"{url}: {ready[0]} can be leased")
                    return exitcodes.OK
                last = ", ".join(f"{n} {s}" for n, s in states.items()) or "no devices"
            if time.monotonic() >= deadline:
                return _fail(
                    exitcodes.TIMED_OUT,
                    f"{url}: no device could be leased within {timeout_s:g} s ({last})",
                )
            if not said and not quiet:  # stderr: fine under --json too
                said = True
                print(f"npu-emu wait: {url}: {last}; waiting", file=sys.stderr, flush=True)
            pause.wait(min(POLL_S, max(deadline - time.monotonic(), 0)))
