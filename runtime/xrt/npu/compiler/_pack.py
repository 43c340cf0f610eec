"""Packing constants into the hardware layout, once per program, into one blob.

Weight blocks (`conv_blocks`), bias rows (`bias_rows`), requantization parameter rows
(`prm_rows`) and lookup tables (`lut_rows`) are numpy arrays in the byte layout a LOAD
copies into a buffer row by row (docs/isa.md "Buffers and memory layouts"); `ConstBlob`
appends them, B-aligned, deduplicating identical arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "ConstBlob",
    "PackedConv",
    "bias_rows",
    "block_spans",
    "conv_blocks",
    "lut_rows",
    "prm_rows",
]


class ConstBlob:
    """The program's constant data: append arrays, get their byte offsets."""

    def __init__(self, align: int) -> None:
        self.align = align
        self._parts: list[bytes] = []
        self._size = 0
        self._seen: dict[bytes, int] = {}

    def add(self, arr: np.ndarray) -> int:
        """Append the bytes of `arr` (C order); returns its offset. Identical data is shared."""
        data = np.ascontiguousarray(arr).tobytes()
        if data in self._seen:
            return self._seen[data]
        offset = self._size
        pad = -len(data) % self.align
        self._parts.append(data + bytes(pad))
        self._size += len(data) + pad
        self._seen[data] = offset
        return offset

    def tobytes(self) -> bytes:
        """The whole blob."""
        return b"".join(self._parts)

    def __len__(self) -> int:
        return self._size


@dataclass(frozen=True)
class PackedConv:
    """Where a convolution's blocks sit and which input blocks each output block uses.

    Attributes:
        blocks: ``(n_blocks, B, B)`` int8, ``[out][in]`` per block, ordered
            ``[ob][ib - ib_lo[ob]][i][j]``.
        first: Index of each output block's first block.
        ib_lo: First input channel block each output block reads.
        ib_n: Number of input channel blocks each output block reads.
    """

    blocks: np.ndarray
    first: tuple[int, ...]
    ib_lo: tuple[int, ...]
    ib_n: tuple[int, ...]


def block_spans(
    o_total: int, cig: int, groups: int, block: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(ib_lo, ib_n)`` of `conv_blocks` without packing: per output block, the first
    input channel block its groups touch and how many (the tiler needs only these)."""
    cog = o_total // groups
    ib_lo, ib_n = [], []
    for ob in range(-(-o_total // block)):
        last = min(o_total, ob * block + block) - 1
        lo = (ob * block // cog) * cig // block
        hi = -(-((last // cog) + 1) * cig // block)
        ib_lo.append(lo)
        ib_n.append(hi - lo)
    return tuple(ib_lo), tuple(ib_n)


def conv_blocks(weight: np.ndarray, groups: int, block: int) -> PackedConv:
    """Pack an OIHW int8 weight (grouped: ``(O, C/g, kh, kw)``) into B x B blocks.

    Block ``(ob, ib, i, j)`` holds ``W[ob*B + o, ib*B + c, i, j]`` at ``[o][c]`` (input channel
    index over all ``C`` channels); entries outside a channel's group, and padding channels,
    are 0. An output block only gets blocks for the input blocks its groups touch, so a
    depthwise convolution packs one diagonal block per output block and tap.
    """
    o_total, cig, kh, kw = weight.shape
    cog = o_total // groups
    zo = -(-o_total // block)
    blocks: list[np.ndarray] = []
    first, ib_lo, ib_n = [], [], []
    for ob in range(zo):
        outs = range(ob * block, min(o_total, ob * block + block))
        gs = {o // cog for o in outs}
        c_lo = min(gs) * cig
        c_hi = (max(gs) + 1) * cig  # exclusive
        lo, hi = c_lo // block, -(-c_hi // block)
        dense = np.zeros((hi - lo, kh, kw, block, block), dtype=np.int8)
        for o in outs:
            g = o // cog
            chans = np.arange(g * cig, g * cig + cig)
            ib = chans // block - lo
            lane = chans % block
            # dense[ib, i, j, o_lane, c_lane] = W[o, c, i, j]
            dense[ib, :, :, o - ob * block, lane] = weight[o].reshape(cig, kh, kw)
        first.append(len(blocks))
        ib_lo.append(lo)
        ib_n.append(hi - lo)
        blocks.extend(dense.reshape(-1, block, block))
    arr = np.stack(blocks) if blocks else np.zeros((0, block, block), np.int8)
    return PackedConv(arr, tuple(first), tuple(ib_lo), tuple(ib_n))


def bias_rows(bias: np.ndarray, block: int) -> np.ndarray:
    """int32 bias -> ``(ceil(O/B), B)`` int32 accumulator rows (padding lanes 0)."""
    zo = -(-len(bias) // block)
    out = np.zeros(zo * block, dtype="<i4")
    out[: len(bias)] = bias
    return out.reshape(zo, block)


def prm_rows(multiplier: np.ndarray, shift: np.ndarray, block: int) -> np.ndarray:
    """Per-channel (M, S) -> ``(ceil(O/B), B)`` PRM words ``{S[21:16], M[15:0]}``.

    Padding lanes get M = 0, S = 0: they requantize to 0, so padding channels stay 0.
    """
    n = len(multiplier)
    zo = -(-n // block)
    out = np.zeros(zo * block, dtype="<u4")
    m = np.asarray(multiplier, dtype=np.int64) & 0xFFFF
    s = np.asarray(shift, dtype=np.int64) & 0x3F
    out[:n] = (s << 16) | m
    return out.reshape(zo, block)


def lut_rows(table: np.ndarray, block: int) -> np.ndarray:
    """A 256-entry int8 table (entry ``q + 128`` for input ``q``) -> ``(256/B, B)`` LUT rows."""
    return np.asarray(table, dtype=np.int8).reshape(256 // block, block)
