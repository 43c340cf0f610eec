"""Data movement that crosses lanes: channel selection (concatenation, channel permutations
such as ShuffleNet's channel shuffle) and flattening a feature map into a vector.

A LOAD or STORE moves whole pixels (B lanes, one bus beat); it cannot move one channel to
another lane. The MAC array can: a GEMM of an input row with a 0/1 block ``[out][in]``
moves lane ``in`` to lane ``out`` exactly (one product per output lane, M = 1, S = 0 on the
way out), so every lowering here is a sum of selection GEMMs:

* `selection`: each output channel comes from one channel of one input, same pixel.
  Concatenation along channels and channel permutations (a ``Transpose`` of the channel
  axes of ``(N, G, C/G, H, W)``) are instances; `emit_select` runs them (one GEMM per
  output plane and input plane it draws on, over a tile of pixels).
* `emit_flatten`: ``(N, C, H, W) -> (N, C*H*W)``: feature ``k = c*H*W + p`` of pixel
  ``p``. Input plane ``z`` (channels ``zB .. zB+B-1``) fills exactly the output rows
  ``[z*H*W, (z+1)*H*W)``, so planes are tiled freely; within them, for each source lane
  ``l`` and each pixel phase ``p0 < B``, the pixels ``p0, p0 + B, ...`` of every plane go
  to one output lane ``(l*H*W + p0) % B`` of consecutive rows: one GEMM with a
  single-entry block, ``B * B`` GEMMs per tile of planes.
"""

from __future__ import annotations

import numpy as np

from xrt.hw import isa
from xrt.npu.compiler._emit import MAX_COUNT, Emitter
from xrt.npu.compiler._layout import View

__all__ = [
    "channel_permutation",
    "concat_blocks",
    "emit_flatten",
    "emit_select",
    "flatten_blocks",
    "flatten_fits",
    "selection",
]

Plan = list[list[tuple[int, int, int]]]
"""Per output plane: the contributions ``(input, input plane, block index)``."""


def selection(sources: list[tuple[int, int]], block: int) -> tuple[np.ndarray, Plan]:
    """0/1 blocks that put channel ``sources[j] = (input, channel)`` into output channel j.

    Returns:
        ``(blocks, plan)``: distinct ``(n, B, B)`` int8 blocks ``[out][in]`` and, per output
        plane, its contributions ``(input, input plane, block index)`` in first-use order.
    """
    zo = -(-len(sources) // block)
    plan: Plan = [[] for _ in range(zo)]
    blocks: list[np.ndarray] = []
    index: dict[bytes, int] = {}
    for z in range(zo):
        parts: dict[tuple[int, int], np.ndarray] = {}
        for j in range(z * block, min(len(sources), z * block + block)):
            i, c = sources[j]
            blk = parts.setdefault((i, c // block), np.zeros((block, block), np.int8))
            blk[j % block, c % block] = 1
        for (i, zi), blk in parts.items():
            key = blk.tobytes()
            if key not in index:
                index[key] = len(blocks)
                blocks.append(blk)
            plan[z].append((i, zi, index[key]))
    if not blocks:
        return np.zeros((0, block, block), np.int8), plan
    return np.stack(blocks), plan


def concat_blocks(channels: list[int], block: int) -> tuple[np.ndarray, Plan]:
    """`selection` of a concatenation along channels of inputs with `channels` each."""
    return selection([(i, c) for i, n in enumerate(channels) for c in range(n)], block)


def channel_permutation(shape: tuple[int, ...], perm: list[int]) -> list[int] | None:
    """For a ``Transpose`` that keeps the batch axis first and the last two (H, W) last:
    the input channel of each output channel (in the merged channel order of
    `xrt.npu.compiler._layout.as_nchw`). None for any other transpose."""
    r = len(shape)
    if r not in (4, 5) or perm[0] != 0 or list(perm[-2:]) != [r - 2, r - 1]:
        return None
    middle = [p - 1 for p in perm[1:-2]]
    if sorted(middle) != list(range(r - 3)):
        return None
    idx = np.arange(int(np.prod(shape[1:-2]))).reshape(shape[1:-2]).transpose(middle)
    return [int(c) for c in idx.reshape(-1)]


def emit_select(
    em: Emitter,
    xs: list[View],
    yv: View,
    wgt_off: int,
    n_blocks: int,
    plan: Plan,
    q_m: int,
    q_s: int,
    lo: int,
    hi: int,
    prm_off: int | None,
) -> None:
    """Output planes as sums of selection GEMMs over input planes (see `selection`), tile by
    tile of output rows; one STORE per tile requantizes (per tensor, or per lane from PRM
    rows at `prm_off`: QConcat's per-input multipliers)."""
    rows, cols = yv.rows, yv.cols
    zi_total = sum(x.planes for x in xs)
    th = max(1, min(rows, MAX_COUNT // cols))
    while th > 1 and (
        zi_total * th * cols > em.half("INP") or yv.planes * th * cols > em.half("ACC")
    ):
        th -= 1
    wbase = em.slot("WGT")
    em.load_run(isa.Buffer.WGT, wbase, wgt_off, n_blocks)
    prm = None
    if prm_off is not None:
        prm = em.slot("PRM")
        em.load_run(isa.Buffer.PRM, prm, prm_off, yv.planes)
    for y0 in range(0, rows, th):
        ty = min(th, rows - y0)
        p = ty * cols
        ibase = em.slot("INP")
        bases = []
        row = ibase
        for x in xs:
            for za in range(0, x.planes, MAX_COUNT):
                nz = min(MAX_COUNT, x.planes - za)
                em.load_view(row + za * p, x, za, nz, y0, ty)
            bases.append(row)
            row += x.planes * p
        abase = em.slot("ACC")
        for zo, parts in enumerate(plan):
            for k, (i, zi, blk) in enumerate(parts):
                em.gemm(
                    abase + zo * p, bases[i] + zi * p, wbase + blk, [(p, 1, 1, 0)],
                    isa.GemmInit.ZERO if k == 0 else isa.GemmInit.ACC,
                )  # fmt: skip
        for za in range(0, yv.planes, MAX_COUNT):
            nz = min(MAX_COUNT, yv.planes - za)
            em.store(
                yv, za, y0, 0, cols, ty, nz, abase + za * p, 1, cols, p, q_m, q_s, lo, hi,
                None if prm is None else prm + za,
            )  # fmt: skip


def flatten_blocks(block: int) -> np.ndarray:
    """The ``B*B`` single-entry blocks (block ``l*B + d`` moves lane l to lane d) and a zero
    block last (index ``B*B``), for `emit_flatten`."""
    blocks = np.zeros((block * block + 1, block, block), np.int8)
    for s in range(block):
        for d in range(block):
            blocks[s * block + d, d, s] = 1
    return blocks


def _flatten_planes(em: Emitter, hw: int, planes: int) -> int:
    """Input planes per tile of `emit_flatten` (0: not even one fits)."""
    return min(planes, MAX_COUNT, em.half("INP") // hw, em.half("ACC") // hw)


def flatten_fits(em: Emitter, c: int, h: int, w: int) -> str | None:
    """None when `emit_flatten` can move ``(C, H, W)``, else why not."""
    hw = h * w
    if hw > MAX_COUNT or _flatten_planes(em, hw, -(-c // em.B)) < 1:
        return f"{h}x{w} pixels per channel exceed a loop count or a buffer half"
    if em.half("WGT") < em.B * em.B + 1:
        return "the flatten's selection blocks exceed half the weight buffer"
    return None


def emit_flatten(em: Emitter, xv: View, yv: View, image: int, wgt_off: int) -> int:
    """Image `image` of ``(N, C, H, W)`` (`xv`) into column `image` of ``(N, C*H*W)`` (`yv`,
    a rank-2 view); returns the GEMM cycles. See the module docstring."""
    b = em.B
    hw = xv.rows * xv.cols
    c = xv.channels
    nz = _flatten_planes(em, hw, xv.planes)
    wbase = em.slot("WGT")
    em.load_run(isa.Buffer.WGT, wbase, wgt_off, b * b + 1)
    cycles = 0
    for za in range(0, xv.planes, nz):
        zb = min(xv.planes, za + nz)
        n = zb - za
        ibase = em.slot("INP")
        em.load_view(ibase, xv, za, n, 0, xv.rows)
        abase = em.slot("ACC")
        # Every lane of the tile's rows starts at 0: a GEMM with the zero block.
        cycles += em.gemm(abase, ibase, wbase + b * b, [(hw, 1, 1, 0), (n, hw, hw, 0)],
                          isa.GemmInit.ZERO)  # fmt: skip
        for src in range(b):
            # The last plane's lanes past C are padding: they are not features.
            planes = n - (1 if zb == xv.planes and c % b and src >= c % b else 0)
            if planes < 1:
                continue
            for p0 in range(min(b, hw)):
                dst_row, dst_lane = divmod(src * hw + p0, b)
                cycles += em.gemm(
                    abase + dst_row, ibase + p0, wbase + src * b + dst_lane,
                    [(-(-(hw - p0) // b), 1, b, 0), (planes, hw, hw, 0)],
                )  # fmt: skip
        first, end = za * hw, min(zb * hw, yv.planes)
        for r in range(first, end, MAX_COUNT):
            k = min(MAX_COUNT, end - r)
            em.store(yv, r, 0, image, 1, 1, k, abase + r - first, 1, 1, 1)
    return cycles
