"""The device port's records on the worker pipe (`npuemu.worker.protocol` frames them): a
request's map is its ``id``, its tag ``t`` and its fields; a reply's its ``id``, ``cycles``,
``start_ps``, its body's tag and fields, and ``error`` (code, message) when it failed; a
device event's (`DeviceEvent`, sent by the worker on its own) ``ev: "device"`` and its
fields. Every request and reply type of `xrt.hw.port` is listed here, so a new one is one
line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from xrt.hw.port import (
    Advance,
    Cancel,
    DeviceEvent,
    Done,
    ModelRestore,
    ModelSave,
    PortError,
    PortErrorCode,
    PristineRestore,
    PristineSave,
    Quit,
    RegBatch,
    RegResults,
    Remap,
    Reply,
    Request,
    Reset,
    RingAttach,
    RingDetach,
    StateSaved,
    StateTime,
    TapFlush,
    WaitIrq,
    WaitResult,
    WatchRings,
    WavesForget,
    WavesStart,
    WavesState,
    WavesStatus,
    WavesStop,
    WavesWindow,
)
from xrt.hw.ring import RING_MAX_OPS

__all__ = [
    "decode_event",
    "decode_reply",
    "decode_request",
    "encode_event",
    "encode_reply",
    "encode_request",
]

_ERROR_CODES = frozenset(c.value for c in PortErrorCode)


_REQUESTS: dict[str, type] = {
    cls.TAG: cls
    for cls in (
        RegBatch, WaitIrq, Reset, ModelSave, ModelRestore, PristineSave, PristineRestore,
        Remap, RingAttach, RingDetach, WavesStart, WavesStop, WavesStatus, WavesForget,
        Advance, TapFlush, WatchRings, Cancel, Quit,
    )
}  # fmt: skip
_REPLIES: dict[str, type] = {
    cls.TAG: cls
    for cls in (Done, RegResults, WaitResult, StateTime, StateSaved, WavesWindow, WavesState)
}


def _fields_of(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record)}


def encode_request(req_id: int, request: Request, *, read_only: bool = False) -> dict[str, Any]:
    """A frame's map for `request` (`xrt.hw.port`'s pipe codec; msgpack carries it)."""
    out = {"id": req_id, "t": request.TAG, **_fields_of(request)}
    if read_only:
        out["read_only"] = True
    return out


def decode_request(msg: Mapping[str, Any]) -> tuple[int, Request, bool]:
    """(id, request, read_only) of a frame's map.

    Raises:
        ValueError: not a request this port knows, or a field of the wrong type (named).
    """
    tag = msg.get("t")
    cls = _REQUESTS.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ValueError(f"unknown request {tag!r}")
    req_id = msg.get("id")
    if not isinstance(req_id, int):
        raise ValueError(f"request {tag}: id {req_id!r} is not an integer")
    kwargs = {}
    for f in fields(cls):
        if f.name not in msg:
            continue
        value = msg[f.name]
        kwargs[f.name] = tuple(value) if isinstance(value, list) else value
    try:
        request = cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"request {tag}: {exc}") from None
    _check_request(request)
    return req_id, request, bool(msg.get("read_only", False))


def _check_request(request: Request) -> None:
    """The field types a request must have (the pipe's other end is trusted code, but a
    wrong type must fail here, naming it, not deep in a handler)."""
    for f in fields(request):
        value = getattr(request, f.name)
        if f.name == "signals" and not isinstance(value, str):
            raise ValueError(f"{request.TAG}.{f.name} is {type(value).__name__}")
        if f.name in ("records", "path") and not isinstance(value, (bytes, str)):
            raise ValueError(f"{request.TAG}.{f.name} is {type(value).__name__}")
        if f.name in ("n", "max_cycles", "cycles", "of") and not isinstance(value, int):
            raise ValueError(f"{request.TAG}.{f.name} is {type(value).__name__}")
        if f.name == "on" and not isinstance(value, bool):
            raise ValueError(f"{request.TAG}.{f.name} is {type(value).__name__}")
    if isinstance(request, RegBatch):
        if not 0 <= request.n <= RING_MAX_OPS:
            raise ValueError(f"batch of {request.n} ops (at most {RING_MAX_OPS})")
        request.check_kinds()


def encode_reply(reply: Reply) -> dict[str, Any]:
    """A frame's map for `reply`."""
    out: dict[str, Any] = {"id": reply.id, "cycles": reply.cycles, "start_ps": reply.start_ps}
    if reply.cancelled:
        out["cancelled"] = True
    if reply.error is not None:
        out["error"] = (str(reply.error.code), reply.error.message)
    if reply.body is not None:
        out["t"] = reply.body.TAG
        out.update(_fields_of(reply.body))
    return out


def decode_reply(msg: Mapping[str, Any]) -> Reply:
    """The `Reply` of a frame's map.

    Raises:
        ValueError: a reply this port does not know.
    """
    body = None
    tag = msg.get("t")
    if tag is not None:
        cls = _REPLIES.get(tag)
        if cls is None:
            raise ValueError(f"unknown reply {tag!r}")
        kwargs = {f.name: msg[f.name] for f in fields(cls) if f.name in msg}
        if cls is StateSaved:
            kwargs["registers"] = tuple(tuple(r) for r in kwargs.get("registers", ()))
        if cls is WavesWindow and kwargs.get("file") is not None:
            kwargs["file"] = tuple(kwargs["file"])
        body = cls(**kwargs)
    error = None
    if "error" in msg:
        code, message = msg["error"]
        error = PortError(
            PortErrorCode(code) if code in _ERROR_CODES else PortErrorCode.INTERNAL,
            str(message),
        )  # fmt: skip
    return Reply(
        id=int(msg["id"]),
        cycles=int(msg.get("cycles", 0)),
        start_ps=msg.get("start_ps"),
        body=body,
        error=error,
        cancelled=bool(msg.get("cancelled", False)),
    )


def encode_event(event: DeviceEvent) -> dict[str, Any]:
    """A frame's map for a device event (``ev: "device"``)."""
    return {"ev": "device", **_fields_of(event)}


def decode_event(msg: Mapping[str, Any]) -> DeviceEvent:
    """The `DeviceEvent` of a frame's map.

    Raises:
        ValueError: a field missing or of the wrong type (named).
    """
    kinds = {"kind": str, "cycle": int, "level": int, "message": str}
    for name, kind in kinds.items():
        if not isinstance(msg.get(name), kind) or isinstance(msg.get(name), bool):
            raise ValueError(f"device event: {name} is {type(msg.get(name)).__name__}")
    return DeviceEvent(msg["kind"], msg["cycle"], msg["level"], msg["message"])
