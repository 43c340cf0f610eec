"""Time profile of a session run: wall, memory, hardware and other time per operator.

The manual's ``timeProfileResults()`` gives, per op id, ``(wall, mem, hard, other)`` in
milliseconds (its example prints ``wall = {}ms``); so does ours.
Here one `OpTime` per execution unit (an operator, or a merged `xrt.backend.Subgraph`,
filed under its first op id):

* ``wall``: time from the call into the backend until it returned;
* ``memory``: what the backend reported as memory traffic (host: viewing inputs and
  copying results into their tensors; an NPU backend: DMA and copies);
* ``hardware``: what the backend reported as device compute time (0 on the host);
* ``other``: the rest, ``wall - memory - hardware`` (on the host: the numpy kernel).

`op_type_summary` folds the units by op type, as InfiniTensor's runtime prints its
profile (op type, count, total time, share, mean); a merged NPU program is one unit of
type ``Subgraph``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = [
    "OpTime",
    "OpTypeTime",
    "format_op_type_summary",
    "format_profile_table",
    "op_type_summary",
]


@dataclass(frozen=True)
class OpTime:
    """Times of one execution unit, in milliseconds (as the manual's profile).

    Attributes:
        op_ids: The operators of the unit (one, or a subgraph's).
        op_type: The op type, or ``"Subgraph"``.
        name: The operator's name (a subgraph: its id range).
        backend: Name of the backend class that ran it.
        wall: Wall time of the backend call.
        memory: Memory time reported by the backend.
        hardware: Hardware time reported by the backend.
    """

    op_ids: tuple[int, ...]
    op_type: str
    name: str
    backend: str
    wall: float
    memory: float
    hardware: float

    @property
    def other(self) -> float:
        """``wall - memory - hardware`` (never negative)."""
        return max(0.0, self.wall - self.memory - self.hardware)

    def __iter__(self) -> Iterator[float]:
        """``wall, memory, hardware, other = op_time`` (the manual's tuple)."""
        return iter((self.wall, self.memory, self.hardware, self.other))


def format_profile_table(
    results: Mapping[int, OpTime], total: float, session_io: float, title: str = ""
) -> str:
    """A text table: one row per unit (milliseconds, share of the total), then totals.

    Args:
        results: Op id -> `OpTime`, in execution order.
        total: Wall time of the whole call, seconds (`Session.total_time`).
        session_io: Seconds the session spent copying inputs in and outputs out.
        title: First line, if any.
    """
    header = (
        f"{'op':>5}  {'type':<14} {'name':<22} {'backend':<16} "
        f"{'wall ms':>9} {'mem ms':>8} {'hw ms':>8} {'other ms':>9} {'%':>6}"
    )
    lines = [title] if title else []
    lines += [header, "-" * len(header)]
    sums = [0.0, 0.0, 0.0, 0.0]
    for op_id, t in results.items():
        name = t.name if len(t.name) <= 22 else t.name[:21] + "~"
        share = 100.0 * t.wall / (total * 1e3) if total > 0 else 0.0
        lines.append(
            f"{op_id:>5}  {t.op_type:<14.14} {name:<22} {t.backend:<16.16} "
            f"{t.wall:>9.3f} {t.memory:>8.3f} {t.hardware:>8.3f} "
            f"{t.other:>9.3f} {share:>6.1f}"
        )
        for i, v in enumerate(t):
            sums[i] += v
    lines.append("-" * len(header))
    lines.append(
        f"{'':>5}  {'operators':<14} {len(results):<22} {'':<16} {sums[0]:>9.3f} "
        f"{sums[1]:>8.3f} {sums[2]:>8.3f} {sums[3]:>9.3f} "
        f"{(100.0 * sums[0] / (total * 1e3) if total > 0 else 0.0):>6.1f}"
    )
    lines.append(
        f"{'':>5}  {'session I/O':<14} {'inputs in, outputs out':<22} {'':<16} "
        f"{session_io * 1e3:>9.3f}"
    )
    lines.append(f"{'':>5}  {'total':<14} {'':<22} {'':<16} {total * 1e3:>9.3f}")
    return "\n".join(lines)


@dataclass(frozen=True)
class OpTypeTime:
    """The units of one op type in a profile (milliseconds).

    Attributes:
        op_type: The op type (``Subgraph`` for merged units).
        count: Units of that type.
        total: Their summed wall time.
        share: ``total`` as a percentage of all units' wall time.
    """

    op_type: str
    count: int
    total: float
    share: float

    @property
    def mean(self) -> float:
        """Mean wall time per unit."""
        return self.total / self.count if self.count else 0.0


def op_type_summary(results: Mapping[int, OpTime]) -> list[OpTypeTime]:
    """Per op type: count, total wall time, share of the units' total; largest total first."""
    totals: dict[str, list[float]] = {}
    for t in results.values():
        totals.setdefault(t.op_type, []).append(t.wall)
    grand = sum(sum(v) for v in totals.values())
    rows = [
        OpTypeTime(k, len(v), sum(v), 100.0 * sum(v) / grand if grand > 0 else 0.0)
        for k, v in totals.items()
    ]
    return sorted(rows, key=lambda r: (-r.total, r.op_type))


def format_op_type_summary(results: Mapping[int, OpTime], title: str = "") -> str:
    """`op_type_summary` as a text table (InfiniTensor's per-op-type profile)."""
    header = f"{'op type':<16} {'count':>6} {'total ms':>10} {'%':>6} {'mean ms':>9}"
    lines = [title] if title else []
    lines += [header, "-" * len(header)]
    for r in op_type_summary(results):
        lines.append(
            f"{r.op_type:<16.16} {r.count:>6} {r.total:>10.3f} {r.share:>6.1f} {r.mean:>9.3f}"
        )
    return "\n".join(lines)
