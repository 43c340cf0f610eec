"""An operator's look at a device someone else holds: `Observer` (the Observe* calls).

    with Observer("grpc://127.0.0.1:50051/npu0") as obs:     # $NPU_EMU_ADMIN_TOKEN
        print(obs.holder, hex(obs.read_register(0x4000_000C)))
        obs.start_waves(20_000)
        status = obs.waves_status(wait_s=30)                   # until it ends, or 30 s
        window = obs.stop_waves()

The server must have been started with ``--admin-token-file``; the admin token goes as the
metadata ``x-npu-emu-admin`` (`xrt.hw.wire.ADMIN_KEY`) on every call, taken from
``$NPU_EMU_ADMIN_TOKEN`` (never from the URL: URLs end up in logs). The client token, TLS
and the retry budget come from the URL as for `GrpcTransport`. An observer takes no lease
and changes nothing on the device: it reads registers (those whose read has a side effect
are refused) and records waveform windows of what the holder does; it cannot reach
memory. docs/debugging.md, "Observing a held device".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from xrt.errors import ErrorCode, XrtError
from xrt.hw.wire import ADMIN_KEY, RegisterStatus, pb
from xrt.transport.grpc.calls import RPC_SLACK_S, DeviceClient
from xrt.transport.grpc.channel import parse_url
from xrt.transport.grpc.errors import register_status_error
from xrt.transport.grpc.lease import default_client
from xrt.transport.grpc.transport import WaveFile

__all__ = ["ADMIN_TOKEN_ENV", "ObservedWindow", "Observer", "WindowStatus"]

ADMIN_TOKEN_ENV = "NPU_EMU_ADMIN_TOKEN"
"""Where an observer's admin token comes from."""

_PREFIX = "OBSERVER_WINDOW_STATE_"


def _state(value: int) -> str:
    """An ``ObserverWindowState`` as a word: ``recording``, ``full``, ``cut_by_holder``..."""
    return pb.ObserverWindowState.Name(value).removeprefix(_PREFIX).lower()


@dataclass(frozen=True)
class WindowStatus:
    """Where the observer's waveform window of a device is.

    Attributes:
        state: ``none`` (no window yet), ``recording``, or why it ended: ``stopped``,
            ``full`` (it reached its cycles), ``cut_by_holder`` (the holder started a window
            of its own), ``cut_by_lease_end``.
        first_cycle: Where the window began.
        cycles: The device's cycle count now.
        holder: Who holds the device ("" when nobody does).
    """

    state: str
    first_cycle: int
    cycles: int
    holder: str


@dataclass(frozen=True)
class ObservedWindow:
    """An observer's finished window: its file (on the server's machine) and why it ended
    (`WindowStatus.state`)."""

    file: WaveFile
    state: str


class Observer:
    """The Observe* calls on one device, with the admin token.

    Args:
        url: ``grpc://HOST:PORT/DEVICE`` or ``grpcs://...`` (a device name is required).
        admin_token: The server's admin token (default: ``$NPU_EMU_ADMIN_TOKEN``). Without
            one the calls are sent without it and the server refuses them.
        client: Who is looking, for the server's log (default: ``xrt:USER@HOST:PID``).

    Raises:
        XrtError: 11003 without a device name in the URL; those of `parse_url`.
    """

    def __init__(
        self, url: str, *, admin_token: str | None = None, client: str | None = None
    ) -> None:
        u = parse_url(url)
        if not u.device:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{url!r}: name the device to observe (grpc://HOST:PORT/npu0)",
            )
        self.device = u.device
        self.client = client or u.client or default_client()
        self._client = DeviceClient(u.address, tls=u.tls, token=u.token, retry_s=u.retry_s)
        admin = admin_token or os.environ.get(ADMIN_TOKEN_ENV) or None
        if admin:
            self._client.metadata += ((ADMIN_KEY, admin),)
        self.holder = ""  # as the last answer named it
        self.cycles = 0  # the device's cycle count in the last answer
        self._info: pb.DeviceInfo | None = None

    def info(self) -> pb.DeviceInfo:
        """The server's description of the device (ListDevices, asked once): its register
        block bases, target, state and holder.

        Raises:
            XrtError: 11002 when the server has no such device.
        """
        if self._info is None:
            listing = self._client.unary(
                "ListDevices", pb.ListDevicesRequest(), "listing devices", timeout=RPC_SLACK_S
            )
            found = [d for d in listing.devices if d.name == self.device]
            if not found:
                names = ", ".join(d.name for d in listing.devices)
                raise XrtError(
                    ErrorCode.FILE_NOT_FOUND, f"no device {self.device!r} (devices: {names})"
                )
            self._info = found[0]
            self.holder = self._info.holder
        return self._info

    def block_base(self, block: str) -> int:
        """Physical address of register block `block` (``npu``, ``dma``) of the device."""
        for b in self.info().register_blocks:
            if b.name == block:
                return int(b.base)
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{self.device} has no register block {block!r}")

    def _call(self, method: str, request: object, what: str) -> Any:  # the RPC's response
        return self._client.unary(
            method, request, f"{what} ({self.device}, observing)", timeout=RPC_SLACK_S
        )

    # -- registers -----------------------------------------------------------------------

    def read_registers(self, addresses: Sequence[int]) -> list[int]:
        """Read registers by physical address, in one batch.

        Raises:
            XrtError: 11014 when refused (no admin token, a register whose read has a side
                effect, ...) or when the bus answers SLVERR/DECERR; 11012 when the device is
                not held by anyone.
        """
        ops = [pb.RegisterOp(read=pb.RegisterRead(address=a)) for a in addresses]
        resp = self._call(
            "ObserveRegisterBatch",
            pb.ObserveRegisterBatchRequest(device=self.device, ops=ops, client=self.client),
            f"reading {len(ops)} register(s)",
        )
        self.holder, self.cycles = resp.holder, int(resp.cycles)
        values = []
        for i, (addr, result) in enumerate(zip(addresses, resp.results, strict=False)):
            if result.status != RegisterStatus.OK:
                raise register_status_error(
                    result.status, index=i, op="read", address=addr, value=result.value,
                    region=self.device,
                )  # fmt: skip
            values.append(int(result.value))
        return values

    def read_register(self, address: int) -> int:
        """Read one register (see `read_registers`)."""
        resp = self._call(
            "ObserveReadRegister",
            pb.ObserveReadRegisterRequest(device=self.device, address=address, client=self.client),
            f"reading register {address:#x}",
        )
        self.holder, self.cycles = resp.holder, int(resp.cycles)
        if resp.status != RegisterStatus.OK:
            raise register_status_error(
                resp.status, index=None, op="read", address=address, value=resp.value,
                region=self.device,
            )  # fmt: skip
        return int(resp.value)

    # -- waveforms (a server started with --waves) ---------------------------------------

    def start_waves(self, cycles: int = 0, signals: str = "") -> int:
        """Open the observer's waveform window for `cycles` simulated cycles of the holder's
        activity (0: until `stop_waves`), of the signals under the comma-separated
        hierarchical names of `signals` ("": all); return the device's cycle count then.
        Advances no simulated time.

        Raises:
            XrtError: 11012 when the server has no --waves, a window is already open (the
                holder's or another observer's) or nobody holds the device.
        """
        resp = self._call(
            "ObserveStartWaves",
            pb.ObserveStartWavesRequest(
                device=self.device, cycles=cycles, client=self.client, signals=signals
            ),
            "starting a waveform window",
        )
        self.holder, self.cycles = resp.holder, int(resp.cycles)
        return int(resp.cycles)

    def waves_status(self, wait_s: float = 0.0) -> WindowStatus:
        """Where the observer's window is; with `wait_s` (at most 60), the server answers
        once the window stopped recording or after that long, whichever comes first."""
        resp = self._call(
            "ObserveWavesStatus",
            pb.ObserveWavesStatusRequest(
                device=self.device, client=self.client, wait_ms=round(min(wait_s, 60.0) * 1000)
            ),
            "looking at the waveform window",
        )
        self.holder, self.cycles = resp.holder, int(resp.cycles)
        return WindowStatus(
            _state(resp.state), int(resp.first_cycle), int(resp.cycles), resp.holder
        )

    def stop_waves(self) -> ObservedWindow:
        """Close the observer's window if it is still open; return its file and why it
        ended.

        Raises:
            XrtError: 11012 when no observer window was started on the device.
        """
        resp = self._call(
            "ObserveStopWaves",
            pb.ObserveStopWavesRequest(device=self.device, client=self.client),
            "stopping the waveform window",
        )
        self.cycles = int(resp.cycles)
        f = resp.file
        return ObservedWindow(
            WaveFile(f.path, f.first_cycle, f.last_cycle, f.size_bytes), _state(resp.state)
        )

    # -- closing -------------------------------------------------------------------------

    def close(self) -> None:
        self._client.channel.close()

    def __enter__(self) -> Observer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
