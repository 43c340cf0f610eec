"""Sliding windows over NCHW tensors (im2col without a Python loop per pixel)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from xrt.ops._common import pool_out_size


def out_hw(
    h: int,
    w: int,
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    ceil_mode: bool = False,
) -> tuple[int, int]:
    """Output height and width; pads are ``[top, left, bottom, right]``."""
    ho = pool_out_size(h, kernel[0], strides[0], pads[0], pads[2], dilations[0], ceil_mode)
    wo = pool_out_size(w, kernel[1], strides[1], pads[1], pads[3], dilations[1], ceil_mode)
    return ho, wo


def windows(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    out_size: tuple[int, int],
    pad_value: float | int = 0,
) -> np.ndarray:
    """A strided view ``(N, C, Ho, Wo, kh, kw)`` of the padded input.

    The input is padded with `pad_value` by `pads` (``[top, left, bottom, right]``) and, when a
    ceil-mode window runs past the bottom/right padding, by as much more as it needs.
    """
    _n, _c, h, w = x.shape
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    ho, wo = out_size
    span_h = dh * (kh - 1) + 1
    span_w = dw * (kw - 1) + 1
    extra_h = max(0, (ho - 1) * sh + span_h - (h + pads[0] + pads[2]))
    extra_w = max(0, (wo - 1) * sw + span_w - (w + pads[1] + pads[3]))
    pad_width = ((0, 0), (0, 0), (pads[0], pads[2] + extra_h), (pads[1], pads[3] + extra_w))
    xp = (
        np.pad(x, pad_width, mode="constant", constant_values=pad_value)
        if any(p for pw in pad_width for p in pw)
        else x
    )
    win = sliding_window_view(xp, (span_h, span_w), axis=(2, 3))
    return win[:, :, : (ho - 1) * sh + 1 : sh, : (wo - 1) * sw + 1 : sw, ::dh, ::dw]


def conv_core(
    x: np.ndarray,
    weight: np.ndarray,
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    groups: int,
    dtype: type[np.floating] = np.float32,
) -> np.ndarray:
    """Grouped 2-D convolution without bias, computed in `dtype`.

    Dense and grouped convolutions become one batched matmul per group over im2col columns
    (BLAS); depthwise ones (one input channel per group) loop over the kernel taps.
    With ``dtype=np.float64`` and integer-valued operands the result is exact as long as every
    partial sum stays below 2**53 (int8 x int8 products summed over far fewer than 2**38
    terms), which is how the integer kernels use it.
    """
    n, _c, h, w = x.shape
    co, cig, kh, kw = weight.shape
    g = groups
    cog = co // g
    ho, wo = out_hw(h, w, (kh, kw), strides, pads, dilations)
    x = x.astype(dtype, copy=False)
    wt = weight.astype(dtype, copy=False)
    if kh == kw == 1 and not any(pads) and tuple(strides) == (1, 1):
        cols = x.reshape(n, g, cig, h * w)
        out = np.matmul(wt.reshape(1, g, cog, cig), cols)
        return out.reshape(n, co, ho, wo)
    win = windows(x, (kh, kw), strides, pads, dilations, (ho, wo), 0)
    if cig == 1 and g > 1:
        # Depthwise (optionally with a channel multiplier): one multiply-add per tap.
        wg = wt.reshape(g, cog, kh, kw)
        acc = np.zeros((n, g, cog, ho, wo), dtype=dtype)
        for i in range(kh):
            for j in range(kw):
                acc += win[:, :, None, :, :, i, j] * wg[None, :, :, i, j, None, None]
        return acc.reshape(n, co, ho, wo)
    win = win.reshape(n, g, cig, ho, wo, kh, kw).transpose(0, 1, 2, 5, 6, 3, 4)
    cols = win.reshape(n, g, cig * kh * kw, ho * wo)
    out = np.matmul(wt.reshape(1, g, cog, cig * kh * kw), cols)
    return out.reshape(n, co, ho, wo)
