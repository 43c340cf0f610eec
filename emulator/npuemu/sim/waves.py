"""Waveform windows on demand, inside a simulation worker of a traced model.

A model built with ``waves=True`` (``npu-emu serve --waves DIR``) carries
``rtl/sim/npu_trace.cpp``: C functions that open an FST file and dump every signal on each
edge of the clock, from a VPI value-change callback (no Python per edge). `WaveRecorder`
reaches them through ctypes in its own process and names each finished window
``DEVICE-cFIRST-cLAST.fst`` by its first and last simulated cycle (an observer's
``DEVICE-observer-cFIRST-cLAST.fst``). Files are 0600 in a folder made 0700: they hold
what the holder's device did.

Only one window is open at a time. A window with a cycle limit closes itself when
simulated time reaches it; time advances only while the device works or is asked to wait,
so an idle device's window stays open until StopWaves (which then closes it).

A window has an owner: the device's holder (``HOLDER``, StartWaves) or an observer
(``OBSERVER``, ObserveStartWaves: an operator recording a held device). Each owner stops
only its own window and is told only of its own last file. The holder goes first: its
StartWaves closes an observer's open window (named, kept for the observer) rather than
being refused, so an observer never changes what the holder's calls do.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "HOLDER",
    "OBSERVER",
    "WaveFile",
    "WaveRecorder",
    "WavesUnavailableError",
    "check_signal_scopes",
]

# `--signals`: comma-separated hierarchical names (npu_sim.u_npu.u_dma, $rootio.irq_o), each a
# scope whose signals the window keeps or one signal. Bounded: the names go to the tracer.
_SCOPE = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*")
MAX_SCOPES = 64
MAX_SCOPES_CHARS = 4096


def check_signal_scopes(text: str) -> str:
    """`text` (``--signals``) if every comma-separated entry is a hierarchical name.

    Raises:
        ValueError: naming the entry that is not one, or a list that is too long.
    """
    if len(text) > MAX_SCOPES_CHARS:
        raise ValueError(f"signals: {len(text)} characters (at most {MAX_SCOPES_CHARS})")
    scopes = [s.strip() for s in text.split(",")] if text.strip() else []
    if len(scopes) > MAX_SCOPES:
        raise ValueError(f"signals: {len(scopes)} names (at most {MAX_SCOPES})")
    for scope in scopes:
        if not _SCOPE.fullmatch(scope):
            raise ValueError(
                f"signals: {scope!r} is not a hierarchical name such as npu_sim.u_npu or "
                "$rootio.irq_o (a scope keeps every signal under it)"
            )
    return ",".join(scopes)


HOLDER = "holder"
OBSERVER = "observer"

# Why an observer's window is no longer recording (ObserverWindowState in the proto, by name).
NONE, RECORDING, STOPPED, FULL, CUT_BY_HOLDER, CUT_BY_LEASE_END = (
    "none",
    "recording",
    "stopped",
    "full",
    "cut_by_holder",
    "cut_by_lease_end",
)


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
            self._last_ps = lib.npu_trace_last_ps
        except AttributeError:
            raise WavesUnavailableError(
                "this simulation model was built without waveform support (serve with --waves DIR)"
            ) from None
        self._start.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p)
        self._start.restype = ctypes.c_int
        self._stop.restype = None
        self._active.restype = ctypes.c_int
        self._first.restype = ctypes.c_uint64
        self._last_ps.restype = ctypes.c_uint64
        self._serial = itertools.count(1)
        self._partial: Path | None = None  # the open (or self-closed, unnamed) window
        self._owner = HOLDER  # whose the open (or self-closed, unnamed) window is
        self._last: dict[str, WaveFile] = {}
        self.observer_state = NONE  # where the observer's last window is

    @property
    def recording(self) -> bool:
        return bool(self._active())

    @property
    def last(self) -> WaveFile | None:
        """The holder's last window."""
        return self._last.get(HOLDER)

    def last_of(self, owner: str) -> WaveFile | None:
        return self._last.get(owner)

    def start(self, now_ps: int, cycles: int = 0, owner: str = HOLDER, signals: str = "") -> None:
        """Open a window of `owner` at simulated time `now_ps`, for `cycles` cycles (0:
        until stop), of the signals under the scopes of `signals` (`check_signal_scopes`;
        "": every signal). The holder's start closes an observer's open window first.

        Raises:
            WavesUnavailableError: a window is already open (the holder's own, or any for
                an observer), or the file cannot be made.
        """
        if self.recording:
            if owner == HOLDER and self._owner == OBSERVER:
                self._close(CUT_BY_HOLDER)
            elif owner == HOLDER:
                raise WavesUnavailableError(
                    f"a waveform window is already open on {self.device}: StopWaves first"
                )
            elif self._owner == HOLDER:
                raise WavesUnavailableError(
                    f"the holder of {self.device} is recording a waveform window of its own: "
                    "try again once it has stopped it"
                )
            else:
                raise WavesUnavailableError(
                    f"an observer's waveform window is already open on {self.device}: "
                    "stop it first (npu-emu waves --observe stops its own)"
                )
        self._name()  # a window that closed itself gets its name now
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = self.folder / f"{self.device}-window{next(self._serial)}.fst.part"
        # The file holds the holder's data: made here 0600, never through a symlink (a
        # stale one is removed, not followed), then opened by the tracer, which keeps the
        # mode. The worker's umask (077, npuemu.server.worker_process) covers the files the
        # tracer makes itself (FST's transient .hier beside it).
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            os.close(os.open(partial, flags, 0o600))
        except OSError as exc:
            raise WavesUnavailableError(f"cannot create {partial}: {exc.strerror}") from None
        stop_ps = now_ps + cycles * self.period_ps if cycles else 0
        scopes = check_signal_scopes(signals).encode()
        code = self._start(str(partial).encode(), self.clock_path.encode(), stop_ps, scopes)
        if code != 0:
            why = {-2: f"no signal {self.clock_path}", -3: f"cannot open {partial}"}
            raise WavesUnavailableError(
                f"cannot start a waveform window: {why.get(code, f'error {code}')}"
            )
        self._partial = partial
        self._owner = owner
        if owner == OBSERVER:
            self.observer_state = RECORDING

    def _name(self) -> None:
        """Name the file of the last window (closed, by a stop or by its cycle limit)."""
        if self._partial is not None and self._partial.exists():
            first = int(self._first()) // self.period_ps
            last = int(self._last_ps()) // self.period_ps
            # An observer's windows are told apart (and never overwrite the holder's).
            who = "-observer" if self._owner == OBSERVER else ""
            final = self.folder / f"{self.device}{who}-c{first}-c{last}.fst"
            self._partial.replace(final)
            self._last[self._owner] = WaveFile(final, first, last)
            if self._owner == OBSERVER and self.observer_state == RECORDING:
                self.observer_state = FULL  # it closed itself
        self._partial = None

    def _close(self, observer_state: str) -> None:
        """Close the open window and name it; an observer's ends in `observer_state`."""
        was_open = self.recording
        self._stop()
        if was_open and self._owner == OBSERVER:
            self.observer_state = observer_state
        self._name()

    def state(self) -> str:
        """Where the observer's last window is (RECORDING, or why it ended, or NONE)."""
        if self.observer_state == RECORDING and not (self.recording and self._owner == OBSERVER):
            self._name()  # it reached its cycle limit: FULL
        return self.observer_state

    def observer_first_cycle(self) -> int:
        """Where the observer's open (or last) window began."""
        if self._owner == OBSERVER and self._partial is not None:
            return int(self._first()) // self.period_ps
        last = self._last.get(OBSERVER)
        return last.first_cycle if last is not None else 0

    def finish(self, owner: str = HOLDER) -> WaveFile | None:
        """Close `owner`'s open window (if any; another owner's stays open) and name the
        last one's file; return `owner`'s last window."""
        if self._owner == owner:
            self._close(STOPPED)
        elif not self.recording:
            self._name()
        return self._last.get(owner)

    def close_all(self) -> None:
        """The worker quits: close whichever window is open and name it."""
        self._close(STOPPED)

    def forget(self) -> None:
        """At a lease end: close any window (an observer's ends CUT_BY_LEASE_END, its file
        kept for the observer); the next holder sees no window of this lease."""
        self._close(CUT_BY_LEASE_END)
        self._last.pop(HOLDER, None)
