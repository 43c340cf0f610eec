"""Waveform windows on demand, inside a simulation worker of a traced model.

A model built with ``waves=True`` (``npu-emu serve --waves DIR``) carries
``rtl/sim/npu_trace.cpp``: C functions that open an FST file and dump every signal on each
edge of the clock, from a VPI value-change callback (no Python per edge). `WaveRecorder`
reaches them through ctypes in its own process and names each finished window
``DEVICE-cFIRST-cLAST.fst`` by its first and last simulated cycle.

Only one window is open at a time. A window with a cycle limit closes itself when
simulated time reaches it; time advances only while the device works or is asked to wait,
so an idle device's window stays open until StopWaves (which then closes it).
"""

from __future__ import annotations

import ctypes
import itertools
from dataclasses import dataclass
from pathlib import Path

__all__ = ["WaveFile", "WaveRecorder", "WavesUnavailableError"]


class WavesUnavailableError(RuntimeError):
    """The model was built without tracing, or no window can be opened now."""


@dataclass(frozen=True)
class WaveFile:
    """A finished window."""

    path: Path
    first_cycle: int
    last_cycle: int

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size


class WaveRecorder:
    """Opens and closes FST windows of one device.

    Args:
        folder: Where the files go.
        device: Device name (the files' prefix).
        clock_path: VPI name of the clock whose edges are dumped (``npu_sim.clk_o``).
        period_ps: Clock period, to turn simulated time into cycles.
    """

    def __init__(self, folder: Path, device: str, clock_path: str, period_ps: int) -> None:
        self.folder = folder
        self.device = device
        self.clock_path = clock_path
        self.period_ps = period_ps
        lib = ctypes.CDLL(None)  # the simulator executable itself (linked with -rdynamic)
        try:
            self._start = lib.npu_trace_start
            self._stop = lib.npu_trace_stop
            self._active = lib.npu_trace_active
            self._first = lib.npu_trace_first_ps
            self._last = lib.npu_trace_last_ps
        except AttributeError:
            raise WavesUnavailableError(
                "this simulation model was built without waveform support (serve with --waves DIR)"
            ) from None
        self._start.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64)
        self._start.restype = ctypes.c_int
        self._stop.restype = None
        self._active.restype = ctypes.c_int
        self._first.restype = ctypes.c_uint64
        self._last.restype = ctypes.c_uint64
        self._serial = itertools.count(1)
        self._partial: Path | None = None  # the open (or self-closed, unnamed) window
        self.last: WaveFile | None = None

    @property
    def recording(self) -> bool:
        return bool(self._active())

    def start(self, now_ps: int, cycles: int = 0) -> None:
        """Open a window at simulated time `now_ps`, for `cycles` cycles (0: until stop).

        Raises:
            WavesUnavailableError: a window is already open, or the file cannot be made.
        """
        if self.recording:
            raise WavesUnavailableError(
                f"a waveform window is already open on {self.device}: StopWaves first"
            )
        self.finish()  # a window that closed itself gets its name now
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.folder / f"{self.device}-window{next(self._serial)}.fst.part"
        stop_ps = now_ps + cycles * self.period_ps if cycles else 0
        code = self._start(str(partial).encode(), self.clock_path.encode(), stop_ps)
        if code != 0:
            why = {-2: f"no signal {self.clock_path}", -3: f"cannot open {partial}"}
            raise WavesUnavailableError(
                f"cannot start a waveform window: {why.get(code, f'error {code}')}"
            )
        self._partial = partial

    def finish(self) -> WaveFile | None:
        """Close the open window (if any) and name the last one's file; return it."""
        self._stop()
        if self._partial is not None and self._partial.exists():
            first = int(self._first()) // self.period_ps
            last = int(self._last()) // self.period_ps
            final = self.folder / f"{self.device}-c{first}-c{last}.fst"
            self._partial.replace(final)
            self.last = WaveFile(final, first, last)
        self._partial = None
        return self.last

    def forget(self) -> None:
        """Between leases: close any window; the next holder sees no window of this one."""
        self.finish()
        self.last = None
