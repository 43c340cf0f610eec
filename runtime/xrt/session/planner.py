"""Liveness-based memory planning: offsets of a session's tensors in one arena.

Every tensor the session materialises (the graph's inputs, and every value that crosses
the boundary of an execution unit) has a lifetime ``[first, last]`` in execution steps:
written at step `first`, read for the last time at step `last` (inclusive). Two tensors
whose lifetimes share a step must not share bytes; others may.

Offsets come from the **greedy-by-size** assignment of Pisarchyk and Lee, "Efficient
Memory Management for Deep Neural Net Inference" (2020), which TensorFlow Lite uses for its
GPU delegate (``GreedyBySizeAssignment``) and, in the same spirit, for its arena planner:
take the tensors largest first; put each in the smallest gap, between the tensors already
placed whose lifetimes overlap its own, that is large enough (best fit); if no gap fits,
put it after the last of them. Sizes are rounded up to the alignment, so every offset is
aligned.

Complexity: n tensors; each placement scans and sorts the already placed tensors whose
lifetimes overlap, so O(n^2 log n) in the worst case and O(n log n) when few lifetimes
overlap (a chain-shaped CNN). For thousands of tensors this is milliseconds.

The result, `MemoryPlan`, reports the arena size (`MemoryPlan.peak_bytes`), the sum of all
tensor sizes (`total_bytes`, what allocating every tensor separately would need) and the
lower bound no placement can beat (`lower_bound_bytes`, the largest sum of the sizes alive
at one step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from xrt._checks import as_alignment, as_int, as_size
from xrt.errors import ErrorCode, XrtError

__all__ = ["DEFAULT_ALIGNMENT", "Lifetime", "MemoryPlan", "Placement", "plan_memory"]

DEFAULT_ALIGNMENT = 64
"""Byte alignment of every offset (a cache line)."""


@dataclass(frozen=True)
class Lifetime:
    """A tensor to place.

    Attributes:
        name: Unique name (the value's name).
        size: Bytes.
        first: Step at which it is written.
        last: Last step at which it is read (>= first).
    """

    name: str
    size: int
    first: int
    last: int


@dataclass(frozen=True)
class Placement:
    """Where a tensor lives: ``[offset, offset + size)`` of the arena, during ``[first, last]``.

    Attributes:
        name: The tensor's name.
        offset: Byte offset in the arena (a multiple of the plan's alignment).
        size: Bytes it needs (not rounded).
        first: Step at which it is written.
        last: Last step at which it is read.
    """

    name: str
    offset: int
    size: int
    first: int
    last: int

    @property
    def end(self) -> int:
        """First byte after the tensor."""
        return self.offset + self.size

    def overlaps_in_time(self, other: Placement | Lifetime) -> bool:
        """True when the two lifetimes share a step."""
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class MemoryPlan:
    """Offsets of every planned tensor in one arena.

    Attributes:
        placements: Name -> `Placement`.
        alignment: Byte alignment of every offset.
        peak_bytes: Arena size: the largest ``offset + aligned size``.
        total_bytes: Sum of every tensor's aligned size (separate allocations).
        lower_bound_bytes: Largest sum of aligned sizes alive at one step; no plan is
            smaller.
    """

    placements: Mapping[str, Placement]
    alignment: int
    peak_bytes: int
    total_bytes: int
    lower_bound_bytes: int

    def offset(self, name: str) -> int:
        """Arena offset of `name`; XrtError 11003 when it is not planned."""
        try:
            return self.placements[name].offset
        except KeyError:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"no tensor {name!r} in the plan") from None

    def conflicts(self) -> list[tuple[str, str]]:
        """Pairs of tensors alive at the same step whose bytes overlap (empty when valid).

        Checks every pair by sweeping over offsets: O(n^2) at worst, for tests.
        """
        items = sorted(
            (p for p in self.placements.values() if p.size), key=lambda p: (p.offset, p.end)
        )
        bad: list[tuple[str, str]] = []
        for i, a in enumerate(items):
            for b in items[i + 1 :]:
                if b.offset >= a.end:
                    break
                if a.overlaps_in_time(b):
                    bad.append((a.name, b.name))
        return bad

    def summary(self) -> str:
        """One line: tensors, arena size, lower bound and the sum of all sizes."""
        ratio = self.peak_bytes / self.total_bytes if self.total_bytes else 0.0
        return (
            f"memory plan: {len(self.placements)} tensors, arena {_human(self.peak_bytes)} "
            f"(lower bound {_human(self.lower_bound_bytes)}) vs "
            f"{_human(self.total_bytes)} allocated separately ({ratio:.1%})"
        )


def _human(n: int) -> str:
    if n < 1 << 10:
        return f"{n} B"
    if n < 1 << 20:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n / (1 << 20):.2f} MiB"


def _aligned(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def plan_memory(lifetimes: Sequence[Lifetime], alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlan:
    """Place `lifetimes` in one arena with the greedy-by-size best-fit assignment.

    Args:
        lifetimes: The tensors (unique names, sizes >= 0, ``first <= last``).
        alignment: Power of two every offset is a multiple of.

    Returns:
        The plan.

    Raises:
        XrtError: 11003 for repeated names, negative sizes or ``first > last``; 11010 for
            wrong types.
    """
    align = as_alignment(alignment)
    seen: set[str] = set()
    items: list[tuple[int, Lifetime]] = []
    for lt in lifetimes:
        if not isinstance(lt, Lifetime):
            raise XrtError(ErrorCode.WRONG_TYPE, f"plan_memory takes Lifetimes, got {lt!r}")
        if lt.name in seen:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"tensor {lt.name!r} is listed twice")
        seen.add(lt.name)
        size = as_size(lt.size, f"size of {lt.name!r}")
        if as_int(lt.first, "first step") > as_int(lt.last, "last step"):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"tensor {lt.name!r}: first step {lt.first} is after its last {lt.last}",
            )
        items.append((_aligned(size, align), lt))

    # Largest first; ties: earlier first, then name, so plans are deterministic.
    items.sort(key=lambda it: (-it[0], it[1].first, it[1].name))
    placed: list[tuple[int, int, Lifetime]] = []  # (offset, aligned end, lifetime)
    placements: dict[str, Placement] = {}
    peak = 0
    for size, lt in items:
        offset = 0
        if size:
            busy = sorted(
                (off, end)
                for off, end, other in placed
                if other.first <= lt.last and lt.first <= other.last
            )
            best: int | None = None
            best_gap = 0
            prev_end = 0
            for off, end in busy:
                gap = off - prev_end
                if gap >= size and (best is None or gap < best_gap):
                    best, best_gap = prev_end, gap
                prev_end = max(prev_end, end)
            offset = prev_end if best is None else best
            placed.append((offset, offset + size, lt))
            peak = max(peak, offset + size)
        placements[lt.name] = Placement(lt.name, offset, lt.size, lt.first, lt.last)

    # Lower bound: the largest live sum over steps (a sweep over step boundaries).
    events: dict[int, int] = {}
    for size, lt in items:
        events[lt.first] = events.get(lt.first, 0) + size
        events[lt.last + 1] = events.get(lt.last + 1, 0) - size
    live = bound = 0
    for step in sorted(events):
        live += events[step]
        bound = max(bound, live)
    total = sum(size for size, _ in items)
    ordered = {lt.name: placements[lt.name] for lt in lifetimes}
    return MemoryPlan(MappingProxyType(ordered), align, peak, total, bound)
