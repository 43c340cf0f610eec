"""The simulator's lockstep trace, read from Python in bulk (docs/verification.md "Lockstep").

Every model `npuemu.sim.build` builds carries the trace (``NPU_LOCKSTEP``:
rtl/sim/npu_cmp_lockstep.sv and rtl/sim/npu_lockstep_dpi.cpp). It records only when the
simulator process starts with ``NPU_EMU_LOCKSTEP=1`` in its environment (read once, at
time zero), so normal runs pay one untaken branch per clock edge. `TraceReader` copies
what the C++ side buffered in one call (ctypes into the simulator's own process, as the
register bus master's queue is filled) and empties it; `xrt.npu.golden.lockstep` checks it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import time

import numpy as np

from xrt.hw.targets import NPU, target
from xrt.npu.golden import Machine
from xrt.npu.golden.lockstep import BEAT_DTYPE, EVENT_DTYPE, Divergence, LockstepChecker

__all__ = ["ENV", "LaunchVetter", "TraceReader", "enabled_in_env"]

log = logging.getLogger("npuemu.lockstep")

ENV = "NPU_EMU_LOCKSTEP"


def enabled_in_env(env: dict[str, str] | None = None) -> bool:
    """Whether a simulator started with this environment records the trace."""
    v = (env if env is not None else os.environ).get(ENV, "")
    return v not in ("", "0")


class TraceReader:
    """Bulk access to the trace buffer of the simulator this Python runs inside.

    Args:
        checker: Where `check` sends each chunk (the golden model of this engine).
    """

    def __init__(self, checker: LockstepChecker) -> None:
        lib = ctypes.CDLL(None)
        self._on = lib.npu_ls_on
        self._sizes = lib.npu_ls_sizes
        self._take = lib.npu_ls_take
        self._sizes.argtypes = [ctypes.c_void_p]
        self._take.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.checker = checker

    @property
    def recording(self) -> bool:
        """True when the model records (it was started with ``NPU_EMU_LOCKSTEP=1``)."""
        return bool(self._on())

    def ended(self) -> int:
        """Launches that ended since the last take (a cheap look: no copy)."""
        sizes = np.zeros(4, np.uint64)
        self._sizes(sizes.ctypes.data)
        return int(sizes[3])

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Everything buffered since the last take: (events, beats, base registers)."""
        sizes = np.zeros(4, np.uint64)
        self._sizes(sizes.ctypes.data)
        events = np.zeros(int(sizes[0]), EVENT_DTYPE)
        beats = np.zeros(int(sizes[1]), BEAT_DTYPE)
        bases = np.zeros(int(sizes[2]), np.uint64)
        self._take(events.ctypes.data, beats.ctypes.data, bases.ctypes.data)
        return events, beats, bases

    def check(self) -> list[Divergence]:
        """Take the trace and check every launch in it that has ended."""
        return self.checker.feed(*self.take())


class LaunchVetter:
    """``npu-emu serve --lockstep`` in a device's worker: every launch of the engine is
    checked against the golden model when it has ended, before the worker answers its next
    request; a divergence fails that request (the server answers INTERNAL, which the runtime
    raises as XrtError 11014), naming "lockstep" and the divergence.

    Args:
        target_name: The device's target (its memory windows).
    """

    def __init__(self, target_name: str) -> None:
        self.reader = TraceReader(LockstepChecker(target(target_name).memories, NPU))
        log.setLevel(logging.INFO)  # one summary line per check in the worker's log
        if not self.reader.recording:
            raise RuntimeError(f"the model does not record its lockstep trace ({ENV} unset)")
        self.divergences = 0
        self.seconds = 0.0  # wall time spent taking and checking traces

    def forget(self) -> None:
        """The engine's buffers are no longer the golden model's (a checkpoint was
        restored): launches are not checked until the next wipe."""
        self.reader.take()  # nothing before the restore is checked either
        self.reader.checker.trusted = False

    def restart(self, *, fresh: bool) -> None:
        """The engine went back to the state leases start from: the boot state (`fresh`:
        buffers zero, as the golden model's new machine) or a warm start's (unknown to the
        golden model: as after a restored checkpoint)."""
        if not fresh:
            self.forget()
            return
        self.reader.take()
        self.reader.checker.machine = Machine(self.reader.checker.config)
        self.reader.checker.trusted = True

    def divergence(self) -> str | None:
        """None, or what the first launch that ended since the last look did otherwise than
        the golden model (the request that ended it fails with this)."""
        if not self.reader.ended():
            return None
        t0 = time.perf_counter()
        try:
            found = self.reader.check()
        except Exception as exc:  # a checker bug fails the request, not the worker
            log.exception("lockstep: the check failed")
            self.reader.checker.trusted = False
            return f"LockstepCheckError: lockstep: {exc}"
        finally:
            self.seconds += time.perf_counter() - t0
        ck = self.reader.checker
        log.info("lockstep: %d launches checked, %d skipped (after an engine error, until "
                 "a wipe), %s, %.2f s checking in all", ck.checked, ck.skipped, dict(ck.stats),
                 self.seconds)  # fmt: skip
        if not found:
            return None
        self.divergences += len(found)
        log.error("%s", found[0])
        return f"LockstepDivergence: {found[0]}"
