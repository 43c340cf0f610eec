"""The header of a checkpoint file (`npuemu.server.checkpoint`): its magic, and its JSON
checked field by field before anything else of the file is believed.

JSON numbers of the wrong kind, strings for numbers, nested values where none belong and
nesting deep enough to exhaust the parser are refused here with the field named, so the
code that reads the sections meets no surprise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from npuemu.server.checkpoint_seal import KEY_ID_HEX
from xrt.hw.targets import TARGETS

__all__ = [
    "FORMAT",
    "MAGIC",
    "MAGIC_V1",
    "MAX_HEADER",
    "CheckpointError",
    "format_of",
    "parse_header",
]

MAGIC = b"NPUCKPT2"
MAGIC_V1 = b"NPUCKPT1"
FORMAT = 2
MAX_HEADER = 64 << 10  # a header lists a few sections: a few hundred bytes
MAX_SECTIONS = 8
_MAX_TEXT = 256  # characters of a header string


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used here: corrupt, truncated, oversized, or for
    another target, hardware version or model (the message names which)."""


def format_of(data: memoryview) -> int:
    """The file's format, from its magic."""
    magic = bytes(data[: len(MAGIC)])
    if magic == MAGIC:
        return FORMAT
    if magic == MAGIC_V1:
        return 1
    raise CheckpointError("not a device checkpoint (no NPUCKPT magic at its start)")


# Header fields: (type, required).
_HEADER_FIELDS: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "format": (int, True),
    "target": (str, True),
    "hw_version": (str, True),
    "model": (str, True),
    "cycle": (int, True),
    "device": (str, False),
    "created": ((int, float), False),
    "seal_key": (str, False),
    "sections": (list, True),
}
_SECTION_FIELDS: dict[str, tuple[type, bool]] = {
    "name": (str, True),
    "codec": (str, True),
    "stored": (int, True),
    "size": (int, True),
    "memory_size": (int, False),
    "pages": (int, False),
    "count": (int, False),
}


def parse_header(raw: bytes, fmt: int) -> dict[str, Any]:
    """The header's fields, every one checked (`created` a float, `seal_key` and
    `device` strings, present or not).

    Raises:
        CheckpointError: naming the field that is missing, of the wrong type or out of range.
    """
    try:
        head = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:120]
        raise CheckpointError(f"the checkpoint's header is not JSON: {what}") from None
    if not isinstance(head, dict):
        raise CheckpointError("the checkpoint's header is not a JSON object")
    _check_fields("the header", head, _HEADER_FIELDS)
    if head["format"] != fmt:
        raise CheckpointError(
            f"checkpoint format {head['format']!r} under a format-{fmt} magic; this server "
            f"reads formats 1 and {FORMAT}"
        )
    if head["target"] not in TARGETS:
        raise CheckpointError(
            f"the checkpoint names target {head['target']!r} (known: {', '.join(TARGETS)})"
        )
    if head["cycle"] < 0 or head.get("created", 0) < 0:
        raise CheckpointError("the checkpoint's cycle or time is negative")
    key_id = head.setdefault("seal_key", "")
    if key_id and (len(key_id) != KEY_ID_HEX or any(c not in "0123456789abcdef" for c in key_id)):
        raise CheckpointError(f"the checkpoint's seal key id {key_id[:40]!r} is malformed")
    head.setdefault("device", "")
    head["created"] = float(head.get("created", 0.0))
    sections = head["sections"]
    if not 0 < len(sections) <= MAX_SECTIONS:
        raise CheckpointError(
            f"the checkpoint lists {len(sections)} sections (1 to {MAX_SECTIONS})"
        )
    for i, sec in enumerate(sections):
        if not isinstance(sec, dict):
            raise CheckpointError(f"the checkpoint's section {i} is not a JSON object")
        _check_fields(f"section {i}", sec, _SECTION_FIELDS)
        if sec["codec"] not in ("raw", "zlib"):
            raise CheckpointError(f"section {sec['name']!r}: unknown codec {sec['codec'][:20]!r}")
        if sec["stored"] < 0 or sec["size"] < 0:
            raise CheckpointError(f"section {sec['name']!r}: a negative size")
    return head


def _check_fields(where: str, obj: dict[str, Any], fields: Mapping[str, tuple[Any, bool]]) -> None:
    for name, (kind, required) in fields.items():
        if name not in obj:
            if required:
                raise CheckpointError(f"{where} of the checkpoint has no {name!r}")
            continue
        value = obj[name]
        # bool is an int to Python, never to this format.
        if isinstance(value, bool) or not isinstance(value, kind):
            raise CheckpointError(f"{where} of the checkpoint: {name!r} is {type(value).__name__}")
        if isinstance(value, str) and len(value) > _MAX_TEXT:
            raise CheckpointError(f"{where} of the checkpoint: {name!r} is too long")
