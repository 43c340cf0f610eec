"""Host byte views of the buffers and host pointers that reads and writes take.

Shared by `MemChunk`, `MemRegion` and `xrt.tensor`: one place decides what counts as a
destination (writable, contiguous) and what as a source (any buffer, any layout).
"""

from __future__ import annotations

from xrt._checks import byte_view
from xrt.errors import ErrorCode, XrtError
from xrt.memptr import MemPtr


def _dest_view(dest: object, what: str) -> memoryview:
    """A writable flat byte view of `dest` (a buffer or a host MemPtr); XrtError 11010 for
    read-only or non-contiguous memory."""
    if isinstance(dest, MemPtr):
        view = dest.cptr()
        if view.readonly:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{what} {dest!r} points to read-only memory")
        return view
    return byte_view(dest, writable=True, what=what)


def _src_view(src: object, what: str) -> memoryview:
    """A flat byte view of `src` (a buffer of any layout or a host MemPtr); XrtError 11010
    for a non-buffer."""
    if isinstance(src, MemPtr):
        return src.cptr()
    return byte_view(src, writable=False, what=what)
