"""Recordings (`xrt.recording`) and the device port (`xrt.hw.port`): the one place where a
request served becomes a recording's request record, and a recorded request a request
again (for a replay).

A recording keeps its own vocabulary, which files on disk have used from the start:
``reset``, ``read_reg``, ``write_reg``, ``batch`` and ``wait_irq`` (`xrt.recording_schema`).
On the port a single read or write is a batch of one; a recording keeps such a batch in
its short form (``read_reg``, ``write_reg``) and replays it as the batch of one it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xrt.hw.port import RegBatch, RegResults, Reply, Request, Reset, Served, WaitIrq, WaitResult
from xrt.hw.regops import MASK32, RegKind

__all__ = ["recorded_reply", "request_of", "served_record"]


def served_record(served: Served) -> tuple[str, dict[str, Any], dict[str, Any] | None] | None:
    """(op, args, reply fields) of a request served, as a recording keeps them (reply
    fields None: the request did not finish); None for what a recording leaves out
    (waveform windows, states, the worker's housekeeping)."""
    request, reply = served.request, served.reply
    if isinstance(request, RegBatch):
        op, args = _register_record(request)
    elif isinstance(request, WaitIrq):
        op, args = "wait_irq", {"max_cycles": request.max_cycles, "wall_s": request.wall_s}
    elif isinstance(request, Reset):
        op, args = "reset", {}
    else:
        return None
    if not reply.ok:
        return op, args, None
    return op, args, recorded_reply(op, reply)


def _register_record(batch: RegBatch) -> tuple[str, dict[str, Any]]:
    """A batch of one plain read or write keeps the recording's short form (``read_reg``,
    ``write_reg``: what recordings have always held for them, and smaller); any other
    batch is a ``batch`` of its rows."""
    rows = batch.rows()
    if len(rows) == 1 and rows[0].mask == MASK32:
        row = rows[0]
        if row.kind == RegKind.READ:
            return "read_reg", {"addr": row.addr}
        if row.kind == RegKind.WRITE:
            return "write_reg", {"addr": row.addr, "value": row.value}
    return "batch", {"ops": [tuple(row) for row in rows]}


def recorded_reply(op: str, reply: Reply) -> dict[str, Any]:
    """The fields a recording keeps of `reply` to a request of `op`."""
    body = reply.body
    if op in ("batch", "read_reg", "write_reg"):
        pairs = body.pairs() if isinstance(body, RegResults) else []
        if op == "batch":
            return {"results": pairs}
        status, value = pairs[0] if pairs else (0, 0)
        return {"status": status, "value": value} if op == "read_reg" else {"status": status}
    if op == "wait_irq":
        w = body if isinstance(body, WaitResult) else WaitResult(0, 0)
        return {"outcome": w.outcome, "waited": w.waited}
    return {}


def request_of(op: str, args: Mapping[str, Any]) -> Request:
    """The request a recorded request record of `op` was (`xrt.recording_schema` checked
    its fields).

    Raises:
        ValueError: an op no recording holds.
    """
    if op == "batch":
        return RegBatch.of_rows([tuple(row) for row in args["ops"]])
    if op == "read_reg":
        return RegBatch.of_rows([(RegKind.READ, args["addr"], 0, MASK32, 0, 0)])
    if op == "write_reg":
        return RegBatch.of_rows([(RegKind.WRITE, args["addr"], args["value"], MASK32, 0, 0)])
    if op == "wait_irq":
        return WaitIrq(int(args["max_cycles"]), float(args["wall_s"]))
    if op == "reset":
        return Reset()
    raise ValueError(f"a recording holds no request {op!r}")
