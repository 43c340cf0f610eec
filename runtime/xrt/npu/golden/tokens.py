"""Dependency token queues: which flag of which unit pops or pushes which queue."""

from __future__ import annotations

from enum import IntEnum

from xrt.hw.isa import Finish, Instruction, Sync, Unit

__all__ = ["FLAG_QUEUE", "QUEUE_ENDS", "Queue", "token_ops", "unit_of"]


class Queue(IntEnum):
    """The four token queues between neighbouring units."""

    L2C = 0  # LOAD push_next -> COMPUTE pop_prev
    C2L = 1  # COMPUTE push_prev -> LOAD pop_next
    C2S = 2  # COMPUTE push_next -> STORE pop_prev
    S2C = 3  # STORE push_prev -> COMPUTE pop_next


QUEUE_ENDS: dict[Queue, tuple[Unit, Unit]] = {
    Queue.L2C: (Unit.LOAD, Unit.COMPUTE),
    Queue.C2L: (Unit.COMPUTE, Unit.LOAD),
    Queue.C2S: (Unit.COMPUTE, Unit.STORE),
    Queue.S2C: (Unit.STORE, Unit.COMPUTE),
}
"""Queue -> (pushing unit, popping unit)."""

FLAG_QUEUE: dict[tuple[Unit, str], Queue] = {
    (Unit.LOAD, "pop_next"): Queue.C2L,
    (Unit.LOAD, "push_next"): Queue.L2C,
    (Unit.COMPUTE, "pop_prev"): Queue.L2C,
    (Unit.COMPUTE, "pop_next"): Queue.S2C,
    (Unit.COMPUTE, "push_prev"): Queue.C2L,
    (Unit.COMPUTE, "push_next"): Queue.C2S,
    (Unit.STORE, "pop_prev"): Queue.C2S,
    (Unit.STORE, "push_prev"): Queue.S2C,
}
"""(unit, token flag) -> the queue it pops or pushes; a flag missing here does not exist on
that unit."""

_UNIT_OF = {"LOAD": Unit.LOAD, "COMPUTE": Unit.COMPUTE, "STORE": Unit.STORE}


def unit_of(insn: Instruction) -> Unit | None:
    """The unit executing ``insn``; None for FINISH."""
    if isinstance(insn, Sync):
        return Unit(insn.unit)
    if isinstance(insn, Finish):
        return None
    return _UNIT_OF[insn.UNIT]


_OPS_CACHE: dict[tuple, tuple[list[Queue], list[Queue], str | None]] = {}


def token_ops(insn: Instruction) -> tuple[list[Queue], list[Queue], str | None]:
    """(queues popped in order, queues pushed in order, the first illegal flag or None).

    The lists are shared between calls: do not modify them.
    """
    d = insn.__dict__
    key = (type(insn), d.get("unit"), d["pop_prev"], d["pop_next"], d["push_prev"], d["push_next"])
    ops = _OPS_CACHE.get(key)
    if ops is None:
        ops = _OPS_CACHE[key] = _token_ops(insn)
    return ops


def _token_ops(insn: Instruction) -> tuple[list[Queue], list[Queue], str | None]:
    unit = unit_of(insn)
    pops: list[Queue] = []
    pushes: list[Queue] = []
    bad = None
    for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
        if not getattr(insn, flag):
            continue
        queue = FLAG_QUEUE.get((unit, flag)) if unit is not None else None
        if queue is None:
            bad = bad or flag
        elif flag.startswith("pop"):
            pops.append(queue)
        else:
            pushes.append(queue)
    return pops, pushes, bad
