"""Buffer mappings: the inputs and outputs of a session as one numbered list of buffers.

The AIC100 runtime describes a program container's I/O as ``BufferMapping`` records (name,
index, direction, size in bytes, data type): inputs first, then outputs, and an inference's
buffers are passed in that order. `buffer_mappings` gives the same list for a session's
view; program containers (`xrt.session.container`, ``xrt compile``) store it in their
manifest and `xrt.aic.Qpc.buffer_mappings` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError

__all__ = ["BufferMapping", "buffer_mappings"]


@dataclass(frozen=True)
class BufferMapping:
    """One input or output buffer of a network (the AIC100 ``BufferMapping``).

    Attributes:
        name: The value's name in the network (``bufferName``).
        index: Its place in the list of all buffers, inputs first (``index``).
        direction: ``"in"`` (from the user to the device) or ``"out"`` (``ioType``).
        size: Bytes of its data (``size``); 0 when its shape is known only at run time.
        dtype: The data type's manual name (``"FP32"``, ``"SInt8"``...; ``dataType``).
        shape: Its dimensions (-1 for one known only at run time).
        hw_layout: The hardware layout a buffer in device memory holds it in (``"C16"``:
            the engine's channel tiles; `xrt.aic.Qpc.buffer_mappings_dma`); empty: the
            logical layout.
    """

    name: str
    index: int
    direction: str
    size: int
    dtype: str
    shape: tuple[int, ...]
    hw_layout: str = ""

    @property
    def is_partial_buffer_allowed(self) -> bool:
        """AIC100's ``isPartialBufferAllowed``: a buffer of another size than `size` is
        taken only for a shape known at run time (a -1 dimension: its size is the run's);
        a buffer of a fixed shape must be exactly its size."""
        return -1 in self.shape

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in a container's manifest."""
        return {
            "name": self.name,
            "index": self.index,
            "direction": self.direction,
            "size": self.size,
            "dtype": self.dtype,
            "shape": list(self.shape),
            **({"hw_layout": self.hw_layout} if self.hw_layout else {}),
        }

    @classmethod
    def from_dict(cls, doc: object) -> BufferMapping:
        """The record of `to_dict` (read from an untrusted manifest).

        Raises:
            XrtError: 11011 when `doc` is not such a record.
        """
        ok = (
            isinstance(doc, dict)
            and isinstance(doc.get("name"), str)
            and all(type(doc.get(k)) is int for k in ("index", "size"))
            and doc.get("direction") in ("in", "out")
            and isinstance(doc.get("dtype"), str)
            and isinstance(doc.get("shape"), list)
            and all(type(d) is int for d in doc["shape"])
            and isinstance(doc.get("hw_layout", ""), str)
        )
        if not ok:
            raise XrtError(ErrorCode.LOAD_FAILED, f"malformed buffer mapping {str(doc)[:200]}")
        assert isinstance(doc, dict)
        return cls(
            doc["name"],
            doc["index"],
            doc["direction"],
            doc["size"],
            doc["dtype"],
            tuple(doc["shape"]),
            doc.get("hw_layout", ""),
        )


def buffer_mappings(
    inputs: Sequence[str], outputs: Sequence[str], values: Mapping[str, TensorType]
) -> list[BufferMapping]:
    """The buffers of a session taking `inputs` and returning `outputs` (`Session.inputs`,
    `Session.outputs`), typed by `values`: inputs, then outputs, numbered in that order."""
    out = []
    for direction, names in (("in", inputs), ("out", outputs)):
        for name in names:
            t = values[name]
            size = t.bytes() if t.is_static else 0
            out.append(
                BufferMapping(name, len(out), direction, size, t.dtype.manual_name, tuple(t.shape))
            )
    return out
