"""Channel-tiled activation layout (docs/isa.md "Buffers and memory layouts").

A tensor ``(N, C, H, W)`` is stored image after image, each as ``ceil(C/B)`` planes of
``H x W`` pixels of B int8 lanes: byte ``(((n*Z + z)*H + y)*W + x)*B + lane`` holds channel
``z*B + lane``. A rank-2 tensor ``(N, K)`` is the same bytes as ``(N, K, 1, 1)``. Lanes past
``C`` in the last plane are padding. A rank-5 tensor ``(N, G, C/G, H, W)`` (a channel
shuffle's middle step) is the same bytes as ``(N, C, H, W)``.

The backends convert host tensors with `to_tiled` / `from_tiled`, int8 NCHW front ends of
`xrt.layout`'s channel-tiled layout (the one `ChannelTiled` host tensors are stored in: the
same bytes as ``ChannelTiled(B)`` over ``NCHW``, or ``NC`` for rank 2). The compiler
addresses them through `View`, a 3-D window (planes, rows, columns) of one image with byte
strides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xrt.errors import ErrorCode, XrtError
from xrt.layout import channel_tiled_shape, tile_channels, untile_channels

__all__ = ["View", "as_nchw", "from_tiled", "tiled_bytes", "tiled_shape", "to_tiled", "view_of"]


def as_nchw(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The 4-D shape a tensor of `shape` is laid out as: rank 4 as is, rank 2 ``(N, K, 1, 1)``,
    rank 5 ``(N, G, C/G, H, W)`` as ``(N, C, H, W)`` (channels split in two axes, as a
    channel shuffle's reshape makes them: the same bytes as the rank-4 tensor).

    Raises:
        XrtError: 11003 for any other rank.
    """
    if len(shape) == 4:
        n, c, h, w = shape
        return int(n), int(c), int(h), int(w)
    if len(shape) == 2:
        return int(shape[0]), int(shape[1]), 1, 1
    if len(shape) == 5:
        n, g, c, h, w = shape
        return int(n), int(g) * int(c), int(h), int(w)
    raise XrtError(ErrorCode.OUT_OF_RANGE, f"no channel-tiled layout for rank {len(shape)}")


def tiled_shape(shape: tuple[int, ...], block: int) -> tuple[int, int, int, int, int]:
    """``(N, Z, H, W, B)``: the array shape of the tiled bytes."""
    n, z, h, w, b = channel_tiled_shape(as_nchw(shape), "NCHW", block)
    return n, z, h, w, b


def tiled_bytes(shape: tuple[int, ...], block: int) -> int:
    """Bytes a tensor of `shape` occupies channel-tiled."""
    return int(np.prod(tiled_shape(shape, block)))


def to_tiled(x: np.ndarray, block: int) -> np.ndarray:
    """NCHW (or NK) int8 -> channel-tiled bytes as a flat uint8 array (padding lanes 0)."""
    nchw = x.reshape(as_nchw(x.shape)).astype(np.int8, copy=False)
    return tile_channels(nchw, "NCHW", block).view(np.uint8).reshape(-1)


def from_tiled(data: np.ndarray | bytes, shape: tuple[int, ...], block: int) -> np.ndarray:
    """Channel-tiled bytes -> int8 tensor of `shape` (padding lanes dropped)."""
    raw = np.frombuffer(bytes(data), dtype=np.int8) if isinstance(data, bytes) else data
    stored = np.asarray(raw).view(np.int8).reshape(tiled_shape(shape, block))
    return untile_channels(stored, as_nchw(shape), "NCHW", block).reshape(shape)


@dataclass(frozen=True)
class View:
    """A 3-D window of channel-tiled memory: ``planes x rows x cols`` pixels of B lanes.

    Attributes:
        base: Base register of the tensor's region.
        offset: Byte offset of pixel (0, 0, 0) from the base.
        planes, rows, cols: Extent of the window.
        channels: Real channels (``<= planes * B``); lanes beyond are padding.
        z_stride, y_stride, x_stride: Byte strides between planes, rows and pixels.
        pixel: Bytes of one pixel (B).
    """

    base: int
    offset: int
    planes: int
    rows: int
    cols: int
    channels: int
    z_stride: int
    y_stride: int
    x_stride: int
    pixel: int

    def at(self, z: int = 0, y: int = 0, x: int = 0) -> int:
        """Byte offset (from the base) of pixel (z, y, x)."""
        return self.offset + z * self.z_stride + y * self.y_stride + x * self.x_stride

    def span(self) -> tuple[int, int]:
        """``[lo, hi)`` byte range the window can touch (for dependency tracking)."""
        return self.offset, self.at(self.planes - 1, self.rows - 1, self.cols - 1) + self.pixel


def view_of(shape: tuple[int, ...], base: int, offset: int, image: int, block: int) -> View:
    """The view of image `image` of a tensor of `shape` placed at ``BASE[base] + offset``.

    Rank-4 tensors give one ``(Z, H, W)`` view per image. A rank-2 ``(N, K)`` tensor gives a
    single view ``(Z, 1, N)`` whose columns are the batch (``image`` must be 0): a dense layer
    then works on the whole batch as a 1 x N image.
    """
    n, c, h, w = as_nchw(shape)
    z = -(-c // block)
    if len(shape) == 2:
        if image:
            raise ValueError("a rank-2 tensor has one view")
        return View(base, offset, z, 1, n, c, block, n * z * block, z * block, block)
    plane = h * w * block
    return View(base, offset + image * z * plane, z, h, w, c, plane, w * block, block, block)
