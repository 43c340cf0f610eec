"""Hardware layouts: how a tensor is stored when the hardware's order differs from its own.

A tensor's logical ("software") layout is the shape of its type, C order, in the type's axis
order (``"NHWC"``). `HwLayout` describes another way of storing it, which
``Tensor(..., hw_layout=...)`` takes. `ChannelTiled` is the one the NPU uses for feature
maps, the channel-tiled activation layout of docs/isa.md ("Buffers and memory layouts"):
channels cut into blocks of B lanes, the last block zero-padded, the block index outermost
after the batch and the lane innermost.

`channel_tiled_shape`, `tile_channels` and `untile_channels` are the only implementation of
that layout. `ChannelTiled` (host tensors) and the compiler's `to_tiled` / `from_tiled`
(`xrt.npu.compiler`, int8 NCHW bytes) are thin users of them, so a tensor stored as
``ChannelTiled(B)`` over ``NCHW`` (or ``NC``) holds the very bytes a program reads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from math import prod

import numpy as np

from xrt._checks import as_size
from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError

__all__ = [
    "ChannelTiled",
    "HwLayout",
    "channel_tiled_shape",
    "tile_channels",
    "untile_channels",
]


# -- the channel-tiled layout over arrays ----------------------------------------------------


def _channel_axes(layout: str) -> tuple[int, list[int]]:
    """``(k, order)``: the index of ``C`` in `layout`, and the transpose taking the split
    array (``C`` cut into block index and lane at ``k``, ``k + 1``) to the stored one.

    Stored order: ``N`` first when the layout starts with it, then the block index, then the
    other axes in layout order, then the lane.
    """
    if "C" not in layout:
        raise XrtError(ErrorCode.WRONG_TYPE, f"channel tiling needs a 'C' axis, not {layout!r}")
    k = layout.index("C")
    # Split axes: i < k -> i, block index -> k, lane -> k + 1, i > k -> i + 1.
    lead = [0] if layout[0] == "N" and k != 0 else []
    others = [i if i < k else i + 1 for i in range(len(layout)) if i != k and i not in lead]
    return k, [*lead, k, *others, k + 1]


def channel_tiled_shape(shape: Sequence[int], layout: str, block: int) -> tuple[int, ...]:
    """Shape of the channel-tiled array of a tensor of `shape` in axis order `layout`.

    For ``NHWC`` with 32-lane blocks ``(1, 4, 4, 40)`` is stored as ``(1, 2, 4, 4, 32)``;
    for ``NCHW`` ``(N, C, H, W)`` as ``(N, ceil(C/B), H, W, B)``.

    Raises:
        XrtError: 11010 when `layout` has no ``C`` axis.
    """
    k, order = _channel_axes(layout)
    dims = list(shape)
    split = [*dims[:k], -(-dims[k] // block), block, *dims[k + 1 :]]
    return tuple(split[a] for a in order)


def tile_channels(logical: np.ndarray, layout: str, block: int) -> np.ndarray:
    """The channel-tiled array (C-contiguous, same dtype, padding lanes 0) of `logical`.

    Raises:
        XrtError: 11010 when `layout` has no ``C`` axis.
    """
    k, order = _channel_axes(layout)
    c = logical.shape[k]
    blocks = -(-c // block)
    pad = [(0, 0)] * logical.ndim
    pad[k] = (0, blocks * block - c)
    padded = np.pad(logical, pad)
    split = padded.reshape(*logical.shape[:k], blocks, block, *logical.shape[k + 1 :])
    return np.ascontiguousarray(split.transpose(order))


def untile_channels(
    stored: np.ndarray, shape: Sequence[int], layout: str, block: int
) -> np.ndarray:
    """The logical array of `shape` held by the channel-tiled array `stored` (padding dropped).

    Raises:
        XrtError: 11010 when `layout` has no ``C`` axis.
    """
    k, order = _channel_axes(layout)
    split = stored.transpose(np.argsort(order))
    dims = list(shape)
    merged = split.reshape(*dims[:k], split.shape[k] * block, *dims[k + 1 :])
    return np.ascontiguousarray(merged[(slice(None),) * k + (slice(0, dims[k]),)])


# -- layouts a Tensor can be stored in -------------------------------------------------------


class HwLayout(ABC):
    """How a tensor is stored when the hardware's layout differs from its logical one."""

    @property
    @abstractmethod
    def name(self) -> str:
        """A short name for dumps and reprs."""

    @abstractmethod
    def check(self, ttype: TensorType) -> None:
        """Raise XrtError 11010 when the layout cannot store tensors of `ttype`."""

    @abstractmethod
    def storage_shape(self, ttype: TensorType) -> tuple[int, ...]:
        """Shape of the stored array (same element type)."""

    @abstractmethod
    def to_hardware(self, logical: np.ndarray, ttype: TensorType) -> np.ndarray:
        """Stored array (C-contiguous) from the logical one; padding is zero."""

    @abstractmethod
    def to_software(self, stored: np.ndarray, ttype: TensorType) -> np.ndarray:
        """Logical array from the stored one."""

    def storage_bytes(self, ttype: TensorType) -> int:
        """Bytes the stored array occupies."""
        return prod(self.storage_shape(ttype)) * ttype.dtype.itemsize

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class ChannelTiled(HwLayout):
    """Channels cut into blocks of `block`, zero-padded to a whole number of blocks.

    The type's layout must name a ``C`` axis; the stored array is `channel_tiled_shape` of
    it. For ``NHWC`` with 32-channel blocks a ``[1, 4, 4, 40]`` tensor is stored as
    ``[1, 2, 4, 4, 32]`` (NC/32HW32c, as NPUs keep feature maps).

    Args:
        block: Channels per block (>= 1).
    """

    def __init__(self, block: int) -> None:
        self.block = as_size(block, "channel block")
        if self.block < 1:
            raise XrtError(ErrorCode.OUT_OF_RANGE, "channel block must be >= 1")

    @property
    def name(self) -> str:
        return f"C{self.block}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChannelTiled) and other.block == self.block

    def __hash__(self) -> int:
        return hash(("ChannelTiled", self.block))

    def check(self, ttype: TensorType) -> None:
        if ttype.layout == "*" or "C" not in ttype.layout:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"channel tiling needs a layout with a 'C' axis, {ttype!r} has {ttype.layout!r}",
            )

    def storage_shape(self, ttype: TensorType) -> tuple[int, ...]:
        self.check(ttype)
        return channel_tiled_shape(ttype.shape, ttype.layout, self.block)

    def to_hardware(self, logical: np.ndarray, ttype: TensorType) -> np.ndarray:
        return tile_channels(logical, ttype.layout, self.block)

    def to_software(self, stored: np.ndarray, ttype: TensorType) -> np.ndarray:
        return untile_channels(stored, ttype.shape, ttype.layout, self.block)
