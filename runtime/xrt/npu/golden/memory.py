"""Memories of a target as numpy byte arrays, addressed by physical address.

A `Memory` holds one zero-filled byte array per window of the target (numpy's zeros are
lazily backed, so a 512 MiB plddr costs only the pages a program touches) and, for error
tests, bus faults: address ranges that answer SLVERR or DECERR.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from xrt.hw.config import MemoryWindow, TargetConfig
from xrt.hw.targets import target

__all__ = ["BusFault", "Memory"]


@dataclass(frozen=True)
class BusFault:
    """Accesses overlapping ``[addr, addr + nbytes)`` answer ``kind`` (SLVERR or DECERR)."""

    addr: int
    nbytes: int
    kind: str
    access: str = "any"  # "read", "write" or "any": which accesses it answers

    def __post_init__(self) -> None:
        if self.kind not in ("SLVERR", "DECERR"):
            raise ValueError(f"bus fault kind must be SLVERR or DECERR, got {self.kind!r}")
        if self.access not in ("read", "write", "any"):
            raise ValueError(f"bus fault access must be read, write or any, got {self.access!r}")


class Memory:
    """The memories one compute engine reaches.

    Args:
        windows: The memory windows (physical base and size).
    """

    def __init__(self, windows: Iterable[MemoryWindow]) -> None:
        self.windows: tuple[MemoryWindow, ...] = tuple(windows)
        self._data = {w.name: np.zeros(w.size, np.uint8) for w in self.windows}
        self.faults: list[BusFault] = []

    @classmethod
    def for_target(cls, name: str | TargetConfig, sizes: Mapping[str, int] | None = None) -> Memory:
        """The memories of a target; ``sizes`` shrinks windows by name (for small tests)."""
        tgt = target(name) if isinstance(name, str) else name
        sizes = sizes or {}
        return cls(replace(w, size=sizes.get(w.name, w.size)) for w in tgt.memories)

    def window_of(self, addr: int, nbytes: int = 1) -> MemoryWindow | None:
        """The window holding all of ``[addr, addr + nbytes)``, or None."""
        for w in self.windows:
            if w.contains(addr, nbytes):
                return w
        return None

    def array(self, window: MemoryWindow | str) -> np.ndarray:
        """The byte array backing a window (index 0 is the window's base address)."""
        return self._data[window if isinstance(window, str) else window.name]

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes at ``addr`` (uint8); ValueError outside every window."""
        w = self._need(addr, nbytes)
        return self.array(w)[addr - w.base : addr - w.base + nbytes].copy()

    def write(self, addr: int, data: bytes | np.ndarray) -> None:
        """Write bytes (or any array's raw bytes) at ``addr``."""
        raw = (
            np.frombuffer(bytes(data), np.uint8)
            if isinstance(data, bytes | bytearray)
            else (np.ascontiguousarray(data).view(np.uint8).ravel())
        )
        w = self._need(addr, raw.size)
        self.array(w)[addr - w.base : addr - w.base + raw.size] = raw

    def add_fault(self, addr: int, nbytes: int, kind: str, access: str = "any") -> None:
        """Make accesses overlapping ``[addr, addr + nbytes)`` answer ``kind`` (only reads
        or only writes with ``access``: a lockstep check knows which bursts failed)."""
        self.faults.append(BusFault(addr, nbytes, kind, access))

    def fault_for(self, starts: np.ndarray, nbytes: int, access: str = "read") -> BusFault | None:
        """The first fault that any access ``[s, s + nbytes)`` (s in ``starts``) hits."""
        for f in self.faults:
            if f.access not in ("any", access):
                continue
            if np.any((starts < f.addr + f.nbytes) & (starts + nbytes > f.addr)):
                return f
        return None

    def _need(self, addr: int, nbytes: int) -> MemoryWindow:
        w = self.window_of(addr, nbytes)
        if w is None:
            raise ValueError(f"[{addr:#x}, +{nbytes}) is not inside one memory window")
        return w
