"""The waveform RPCs (StartWaves, StopWaves) on top of `DeviceService`.

They need a server started with ``--waves DIR`` (a traced model); the files are written by
the device's worker (npuemu.sim.waves) on the server's machine and named by device and
cycle range. A window belongs to its lease: a lease end closes it and the next holder's
StopWaves does not see it.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from npuemu.server.errors import ServiceError
from npuemu.server.manager import DeviceManager
from npuemu.server.service import DeviceService, _unary
from npuemu.sim.waves import check_signal_scopes
from xrt.hw.port import WavesStart, WavesStop, WavesWindow
from xrt.hw.wire import pb

__all__ = ["MAX_WINDOW_CYCLES", "WavesDeviceService", "signal_scopes"]

# A window of a busy device (the DMA streaming) takes about 150 B per cycle as FST
# (bench/bench_waves.py), an idle one far less; this caps a window by cycles at about 1.5 GB.
MAX_WINDOW_CYCLES = 10_000_000


def signal_scopes(text: str) -> str:
    """A request's ``signals``, checked (INVALID_ARGUMENT naming the bad name)."""
    try:
        return check_signal_scopes(text)
    except ValueError as exc:
        raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None


class WavesDeviceService(DeviceService):
    """DeviceService with waveform windows."""

    def __init__(self, manager: DeviceManager, waves_enabled: bool) -> None:
        super().__init__(manager)
        self.waves_enabled = waves_enabled

    def _check_enabled(self) -> None:
        if not self.waves_enabled:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "waveforms are off: start the server with --waves DIR",
            )

    @_unary
    async def StartWaves(self, request, context):
        self._check_enabled()
        if request.cycles > MAX_WINDOW_CYCLES:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"cycles {request.cycles} is more than {MAX_WINDOW_CYCLES}",
            )
        signals = signal_scopes(request.signals)
        lease, d = self.m.use(request.lease_id)
        r = await d.call(WavesStart(request.cycles, signals), lease)
        return pb.StartWavesResponse(cycles=r.cycles)

    @_unary
    async def StopWaves(self, request, context):
        self._check_enabled()
        lease, d = self.m.use(request.lease_id)
        r = await d.call(WavesStop(), lease)
        window = r.body_as(WavesWindow)
        if window.file is None:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"no waveform window was started on {d.name} in this lease",
            )
        return pb.StopWavesResponse(file=self._wave_file(window.file), cycles=r.cycles)

    @staticmethod
    def _wave_file(file: tuple[str, int, int]) -> pb.WaveFile:
        """The worker's (path, first cycle, last cycle) of a finished window."""
        path, first, last = file
        size = Path(path).stat().st_size
        return pb.WaveFile(path=path, first_cycle=first, last_cycle=last, size_bytes=size)
