"""The memory planner: intermediate tensors of a program -> offsets in on-chip and external scratch.

Every intermediate has a lifetime: the positions (in the program's operator order) of the
operator that writes it and of the last operator that reads it, inclusive at both ends, so
an operator's output never shares bytes with its own inputs. Two tensors whose lifetimes
overlap must not overlap in memory; two that do not may share it. `pack` places them greedily
by size (the largest first, each at the lowest offset that clears every already placed tensor
it is live with), as TensorFlow Lite's ``GreedyMemoryPlanner`` does; `split` then chooses
which tensors live in the on-chip memory (ZG330's OCM) within its capacity, the most traffic
first, and leaves the rest to external memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Buffer", "Packing", "overlaps", "pack", "split"]

ALIGN = 64
"""Every tensor starts at a multiple of this (one AXI burst boundary of the engine)."""


@dataclass(frozen=True)
class Buffer:
    """One tensor to place.

    Attributes:
        name: The value it holds.
        size: Bytes.
        start: Position of the operator that writes it.
        end: Position of the last operator that reads it (``>= start``).
        traffic: Bytes the program moves to and from it (what on-chip residency saves).
    """

    name: str
    size: int
    start: int
    end: int
    traffic: int = 0

    def live_with(self, other: Buffer) -> bool:
        """Whether the two lifetimes share an operator."""
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class Packing:
    """Offsets of packed buffers and the bytes the region needs."""

    offsets: dict[str, int]
    size: int


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def pack(buffers: Iterable[Buffer]) -> Packing:
    """Place `buffers` so that no two that are live together overlap (greedy by size).

    Deterministic: ties in size are broken by lifetime start, then name.
    """
    order = sorted(buffers, key=lambda b: (-b.size, b.start, b.name))
    placed: list[tuple[Buffer, int]] = []
    offsets: dict[str, int] = {}
    size = 0
    for buf in order:
        need = _aligned(buf.size)
        busy = sorted(
            (off, off + _aligned(other.size)) for other, off in placed if other.live_with(buf)
        )
        offset = 0
        for lo, hi in busy:
            if lo - offset >= need:
                break
            offset = max(offset, hi)
        placed.append((buf, offset))
        offsets[buf.name] = offset
        size = max(size, offset + need)
    return Packing(offsets, size)


def split(buffers: Sequence[Buffer], capacity: int) -> tuple[list[Buffer], list[Buffer]]:
    """``(on_chip, external)``: the buffers kept in a memory of `capacity` bytes, and the rest.

    All of them when they pack into `capacity`; otherwise buffers are admitted in order of
    traffic per byte (then traffic, then size), each kept only if the on-chip set still packs
    within the capacity.
    """
    if capacity <= 0 or not buffers:
        return [], list(buffers)
    if pack(buffers).size <= capacity:
        return list(buffers), []
    order = sorted(
        buffers, key=lambda b: (-b.traffic / max(b.size, 1), -b.traffic, -b.size, b.name)
    )
    chosen: list[Buffer] = []
    for buf in order:
        if _aligned(buf.size) > capacity:
            continue
        if pack([*chosen, buf]).size <= capacity:
            chosen.append(buf)
    names = {b.name for b in chosen}
    return (
        [b for b in buffers if b.name in names],
        [b for b in buffers if b.name not in names],
    )


def overlaps(buffers: Sequence[Buffer], packing: Packing) -> list[tuple[str, str]]:
    """Pairs of buffers that are live together and overlap in `packing` (empty when valid)."""
    bad = []
    for i, a in enumerate(buffers):
        oa = packing.offsets[a.name]
        for b in buffers[i + 1 :]:
            ob = packing.offsets[b.name]
            if a.live_with(b) and oa < ob + b.size and ob < oa + a.size:
                bad.append((a.name, b.name))
    return bad
