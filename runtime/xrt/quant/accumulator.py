"""Quantizing a convolution's or dense layer's weights and bias within the accumulator bound.

The bound (`xrt.ops.intmath.accumulator_bound`, docs/quantization.md section 4): for every
output channel ``o``, ``|b_q[o]| + 128 * sum|w_q[o]| <= 2**31 - 1``, so no int8 input can
take the int32 accumulator out of range. The default scales (``s_w = max|w| / 127``, bias at
``s_in * s_w``) break it when a bias is large against its channel's weights and the input
scale (a channel whose weights are all near zero, or a tiny input scale): the bias alone
then needs more than 31 bits. `fit_layer` keeps it by construction: such a channel gets a
larger weight scale, just large enough that its bias and weights fit (its weights lose
precision, which the bias dominates anyway). Only when the requantization multiplier could
not represent that scale (an output that saturates on every input) is the bias clamped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from xrt.errors import ErrorCode, XrtError
from xrt.ops import intmath

__all__ = ["FittedLayer", "QuantReport", "fit_layer"]

_MULT_REAL_MAX = float(intmath.MULTIPLIER_MAX)
"""Largest rescale factor ``s_in * s_w / s_out`` the quantizer lets a raised scale reach:
`intmath.quantize_multiplier` represents everything below ``2**15 - 0.5``."""


@dataclass(frozen=True)
class FittedLayer:
    """A layer's integer weights and bias, within the accumulator bound.

    Attributes:
        weight: int8 weights, values in ``[-127, 127]``, the float weight's shape.
        bias: int32 bias per output channel.
        scale: float64 weight scale per output channel.
        raised: Output channels whose weight scale was raised above ``max|w| / 127``.
        clamped: Output channels whose bias was clamped (changed beyond rounding).
    """

    weight: np.ndarray
    bias: np.ndarray
    scale: np.ndarray
    raised: tuple[int, ...]
    clamped: tuple[int, ...]


@dataclass
class QuantReport:
    """What the quantizer changed beyond rounding to keep the accumulator bound.

    Attributes:
        raised: ``(layer, channels)`` per layer with weight scales raised.
        clamped: ``(layer, channels)`` per layer with biases clamped.
    """

    raised: list[tuple[str, int]] = field(default_factory=list)
    clamped: list[tuple[str, int]] = field(default_factory=list)

    def add(self, layer: str, fitted: FittedLayer) -> None:
        if fitted.raised:
            self.raised.append((layer, len(fitted.raised)))
        if fitted.clamped:
            self.clamped.append((layer, len(fitted.clamped)))

    @property
    def raised_channels(self) -> int:
        return sum(n for _, n in self.raised)

    @property
    def clamped_biases(self) -> int:
        return sum(n for _, n in self.clamped)

    def line(self) -> str:
        """One line for ``xrt compile`` / ``xrt run``."""
        text = (
            f"accumulator bound: {self.clamped_biases} bias(es) clamped, "
            f"{self.raised_channels} channel weight scale(s) raised"
        )
        layers = [name for name, _ in self.clamped or self.raised]
        if layers:
            more = f" +{len(layers) - 3} more" if len(layers) > 3 else ""
            text += f" (in {', '.join(layers[:3])}{more})"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "bias_clamped": self.clamped_biases,
            "scale_raised": self.raised_channels,
            "layers_clamped": [name for name, _ in self.clamped],
            "layers_raised": [name for name, _ in self.raised],
        }


def _quantize_rows(w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    q = np.rint(w / scale.reshape((-1,) + (1,) * (w.ndim - 1)))
    return np.clip(q, -intmath.WEIGHT_QMAX, intmath.WEIGHT_QMAX).astype(np.int8)


def fit_layer(
    weight: np.ndarray, bias: np.ndarray, s_in: float, s_out: float, what: str = "layer"
) -> FittedLayer:
    """Per-channel int8 weights and int32 bias of ``y = W x + bias`` for an input at `s_in`
    and an output at `s_out`, within the accumulator bound.

    Each channel starts at ``s_w = max|w| / 127`` (`quantize_weight_per_channel`). A channel
    breaking the bound gets ``s_w *= k`` with ``k = (|b / (s_in s_w)| + 128 sum|w / s_w|) /
    (2**31 - 1 - 64 depth - 1)``: after rounding (each ``|w_q|`` grows by at most 1/2, the
    bias by 1/2) its ``|b_q| + 128 sum|w_q|`` is within int32. The scale is capped where the
    rescale factor ``s_in * s_w / s_out`` stays representable; a channel that still breaks
    the bound there has its bias clamped to what the bound leaves.

    Raises:
        XrtError: 11003 when the weights alone cannot be brought within the bound (more
            than 2**25 products per output).
    """
    w = np.asarray(weight, dtype=np.float64)
    b = np.asarray(bias, dtype=np.float64)
    rows = w.reshape(w.shape[0], -1)
    depth = rows.shape[1]
    amax = np.abs(rows).max(axis=1) if depth else np.zeros(w.shape[0])
    scale = np.array([intmath.symmetric_scale(a, intmath.WEIGHT_QMAX) for a in amax])
    room = intmath.ACC_MAX - intmath.ACC_INPUT_MAX * depth // 2 - 1
    if room <= 0:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{what}: {depth} products per output cannot fit an int32 accumulator",
        )
    cap = _MULT_REAL_MAX * s_out / s_in if s_in > 0 else np.inf
    wq = _quantize_rows(w, scale)
    bq = intmath.quantize_bias(b, s_in * scale)
    bad = np.flatnonzero(
        np.abs(np.nan_to_num(b / (s_in * scale))) + 0.5 > intmath.accumulator_headroom(wq)
    )
    raised: list[int] = []
    clamped: list[int] = []
    for o in bad:
        need = (
            abs(b[o]) / (s_in * scale[o]) + intmath.ACC_INPUT_MAX * np.abs(rows[o]).sum() / scale[o]
        ) / room
        s = min(scale[o] * max(need, 1.0), max(cap, scale[o]))
        if s > scale[o]:
            scale[o] = s
            raised.append(int(o))
        wq[o] = _quantize_rows(w[o : o + 1], scale[o : o + 1])[0]
        head = int(intmath.accumulator_headroom(wq[o : o + 1])[0])
        bq[o] = intmath.quantize_bias(b[o : o + 1], s_in * scale[o : o + 1])[0]
        if abs(int(bq[o])) > head:
            bq[o] = np.clip(int(bq[o]), -max(head, 0), max(head, 0))
            clamped.append(int(o))
    fitted = FittedLayer(wq, bq, scale, tuple(raised), tuple(clamped))
    if intmath.accumulator_bound(wq, bq) > intmath.ACC_MAX:  # by construction: cannot happen
        raise XrtError(ErrorCode.BACKEND_INTERNAL, f"{what}: accumulator bound not kept")
    return fitted
