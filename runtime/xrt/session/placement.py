"""Where a session's operators run, and why the quantized ones left on the host are there.

A placement that moves work to the host silently lets a CI job pass without touching the
NPU. `PlacementReport` makes it visible: operators per backend, and for every operator on a
host backend, each accelerator backend's reason for not taking it (the NPU compiler's
legality verdict). ``Session.placement()`` builds it; ``xrt run`` prints its summary and
``--require-npu`` fails on its `host_quantized` list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xrt.backend import Backend
from xrt.backend._registry import BindContext
from xrt.backend.npu import LONE_ALIAS
from xrt.network import NetworkView, is_quantized_op
from xrt.ops import is_boundary

__all__ = ["OpPlacement", "PlacementReport", "placement_lines", "placement_report"]


@dataclass(frozen=True)
class OpPlacement:
    """One operator's backend.

    Attributes:
        op_id: The operator's id in the network.
        label: ``op.describe()`` (type, id, name).
        op_type: The operator type.
        backend: The class name of the backend it is bound to.
        on_host: Whether that backend computes on the host CPU.
        quantized: Whether it is an integer operator of a quantized network
            (`xrt.network.is_quantized_op`): work an NPU is expected to do (not a
            relabelling reshape the NPU declined as no work).
        refusals: For an operator on the host: (accelerator backend, why it refused) for
            each accelerator backend of the session.
    """

    op_id: int
    label: str
    op_type: str
    backend: str
    on_host: bool
    quantized: bool
    refusals: tuple[tuple[str, str], ...] = ()

    @property
    def reason(self) -> str:
        """The refusals as one line (empty when there are none)."""
        return "; ".join(f"{b}: {why}" for b, why in self.refusals)


@dataclass(frozen=True)
class PlacementReport:
    """Every operator's placement, in network order (the Input and Output ops, which
    compute nothing, are left out); `backends` in the session's order."""

    ops: tuple[OpPlacement, ...]
    backends: tuple[str, ...] = ()
    left_out: tuple[tuple[str, str], ...] = ()
    """Backends the session left out (`Backend.unsupported`), each with why."""

    def counts(self) -> dict[str, int]:
        """Backend class name -> operators bound to it, in the session's backend order."""
        found = Counter(p.backend for p in self.ops)
        order = [b for b in self.backends if b in found] + sorted(set(found) - set(self.backends))
        return {b: found[b] for b in order}

    @property
    def host_quantized(self) -> list[OpPlacement]:
        """Quantized operators bound to a host backend, each with its refusals."""
        return [p for p in self.ops if p.on_host and p.quantized]

    @property
    def uses_accelerator(self) -> bool:
        return any(not p.on_host for p in self.ops)

    def summary_lines(self) -> list[str]:
        """The placement as a few lines: counts per backend, then each quantized operator
        left on the host with its reason."""
        return placement_lines(self.to_dict())

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form (``xrt run --json``, a program container's manifest)."""
        return {
            "ops": len(self.ops),
            "counts": self.counts(),
            "left_out": dict(self.left_out),
            "quantized_ops": sum(p.quantized for p in self.ops),
            "host_quantized": [
                {"op_id": p.op_id, "op": p.label, "backend": p.backend, "reasons": dict(p.refusals)}
                for p in self.host_quantized
            ],
        }


def placement_lines(doc: Mapping[str, Any]) -> list[str]:
    """`PlacementReport.summary_lines` from its `to_dict` form (as a container stores it)."""
    counts = doc.get("counts") or {}
    total = doc.get("ops", sum(counts.values()))
    parts = [f"{n} on {b}" for b, n in counts.items()]
    lines = [f"placement: {total} op(s): {', '.join(parts)}"]
    for backend, why in (doc.get("left_out") or {}).items():
        lines.append(f"  {backend} left out: {why}; its operators went to the backends after it")
    quantized = doc.get("quantized_ops") or 0
    if quantized:
        left = doc.get("host_quantized") or []
        lines.append(
            f"  quantized operators on an accelerator: {quantized - len(left)} of {quantized}"
        )
        for p in left:
            why = "; ".join(f"{b}: {r}" for b, r in (p.get("reasons") or {}).items())
            lines.append(f"  on the host: {p.get('op')}: {why or 'no accelerator backend'}")
    return lines


def placement_report(
    graph: NetworkView, backends: Sequence[Backend], bindings: Mapping[int, Backend]
) -> PlacementReport:
    """The placement of `graph`'s operators as `bindings` says (see `PlacementReport`)."""
    ctx = BindContext(graph, dict(bindings))
    accelerators = [b for b in backends if not b.is_host]
    rows = []
    for op in graph.ops:
        if is_boundary(op):  # Input and Output compute nothing: no placement to report
            continue
        b = bindings[op.op_id]
        refusals: tuple[tuple[str, str], ...] = ()
        if b.is_host:
            found = ((type(a).__name__, a.refusal(op, ctx)) for a in accelerators)
            refusals = tuple((name, why) for name, why in found if why is not None)
        # A relabelling reshape the NPU declines on purpose (alone between host operators,
        # it would be a launch for no work) is no NPU work left on the host.
        no_work = bool(refusals) and all(why == LONE_ALIAS for _, why in refusals)
        rows.append(
            OpPlacement(
                op_id=op.op_id,
                label=op.describe(),
                op_type=op.op_type,
                backend=type(b).__name__,
                on_host=b.is_host,
                quantized=is_quantized_op(op, graph.values) and not no_work,
                refusals=refusals,
            )
        )
    left_out = tuple(
        (type(b).__name__, b.not_supported) for b in backends if b.not_supported is not None
    )
    return PlacementReport(tuple(rows), tuple(type(b).__name__ for b in backends), left_out)
