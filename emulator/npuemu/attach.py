"""``npu-emu attach URL -- PROGRAM ARGS...``: run a C driver (or any program) against a
leased emulated NPU, as it would run on a board.

It opens the device (lease, token and TLS as any client: the URL's parameters and
``$NPU_EMU_TOKEN``), takes the lease's register ring and host-visible memory from the
server's hand-out socket (so the server must be on this machine), and runs PROGRAM with
the descriptors inherited and named in its environment:

- ``NPU_EMU_RING_FDS=MEM,KICK,DONE``: the register ring (`xrt.hw.ring`);
- ``NPU_EMU_UDMA_FD=FD``: the udma memory file (map it: its offset 0 is the udma base);
- ``NPU_TARGET=buyi|zg330``, ``NPU_EMU_DEVICE=grpc://...``.

The C library include/npu/npu_mmio.h (built with ``-DNPU_MMIO_EMU``) reads them. The
lease is held while PROGRAM runs and released when it exits, however it exits (the device
is then cleared for the next holder); its exit status is returned (128 + N when a signal
N ended it, as a shell reports). SIGINT and SIGTERM are passed on to PROGRAM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from xrt import exitcodes
from xrt.errors import ErrorCode, XrtError

__all__ = ["attach"]


def attach(url: str, command: Sequence[str], faults: Sequence[str] = ()) -> int:
    """Run `command` with the device at `url` leased to it (see the module docstring), the
    `faults` armed first (`xrt.npu_device.NpuDevice.inject_fault`: a C driver's error
    paths); returns its exit status.

    Raises:
        XrtError: the device cannot be opened, or its server is not on this machine.
    """
    from xrt.device import Device
    from xrt.npu_device import NpuDevice
    from xrt.npu_device.faults import parse_fault
    from xrt.transport.grpc.local_memory import handout, receive_memory_file

    if not command:
        raise XrtError(ErrorCode.OUT_OF_RANGE, "give the program to run: attach URL -- PROGRAM")
    parsed = [parse_fault(f) for f in faults]  # a typo fails before the lease
    with Device.open(url) as dev:
        if parsed and not isinstance(dev, NpuDevice):
            raise XrtError(ErrorCode.WRONG_TYPE, f"--fault needs an NPU device, not {url}")
        for fault in parsed:
            dev.inject_fault(fault)  # type: ignore[attr-defined]
        transport = dev.transport
        sock = getattr(transport, "local_socket", "")
        if not sock or getattr(transport, "ring", None) is None:
            note = getattr(transport, "ring_note", "not a grpc:// device")
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"npu-emu attach needs the device's register ring, which only a server on this "
                f"machine hands out ({note})",
            )
        lease = transport.lease_id  # type: ignore[attr-defined]
        udma = dev.get_mem_region("udma")
        _, ring_fds = handout(sock, f"{lease} ring", 3)
        fds = [*ring_fds, receive_memory_file(sock, lease, udma.size)]
        env = {
            **os.environ,
            "NPU_EMU_RING_FDS": ",".join(map(str, ring_fds)),
            "NPU_EMU_UDMA_FD": str(fds[3]),
            "NPU_TARGET": dev.target,  # type: ignore[attr-defined]
            "NPU_EMU_DEVICE": str(dev.url),
        }
        try:
            proc = subprocess.Popen(list(command), env=env, pass_fds=fds)
        except OSError as exc:
            raise XrtError(
                ErrorCode.FILE_NOT_FOUND, f"cannot run {command[0]!r}: {exc.strerror}"
            ) from None
        finally:
            for fd in fds:
                os.close(fd)
        return _wait(proc)


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """Wait for `proc`, passing SIGINT and SIGTERM on; its status as a shell reports it."""
    previous = {}

    def pass_on(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, pass_on)
    try:
        code = proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def main(url: str, command: Sequence[str], faults: Sequence[str] = ()) -> int:
    """The ``npu-emu attach`` command."""
    try:
        return attach(url, command, faults)
    except XrtError as exc:
        print(f"npu-emu attach: {exc}", file=sys.stderr)
        return exitcodes.for_error(exc)
