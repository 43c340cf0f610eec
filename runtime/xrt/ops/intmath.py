"""Integer arithmetic of the quantized kernels: the bit-exact reference (docs/quantization.md).

Everything here is specified in docs/quantization.md, section by section; the NPU's vector
unit must reproduce it bit for bit. In short:

* A real, positive rescale factor ``r`` is stored as a 15-bit multiplier ``M`` and a right
  shift ``S``: ``r ~= M * 2**-S`` with ``2**14 <= M < 2**15`` and ``0 <= S <= 46``
  (`quantize_multiplier`).
* Requantisation of an int32 accumulator ``acc``:
  ``y = clamp((acc * M + 2**(S-1)) >> S, lo, hi)`` where ``>>`` is an arithmetic (flooring)
  shift, so ties round towards +infinity; for ``S == 0`` no rounding term is added
  (`requantize`). ``|acc * M| < 2**46``: a 48-bit signed intermediate suffices; numpy int64
  here.
* The accumulator bound (`accumulator_bound`): a convolution or dense layer whose
  ``|b[o]| + 128 * sum|w[o]|`` stays within int32 (at most ``|b[o]| + depth * 127 * 128``
  for int8 weights in ``[-127, 127]`` and ``depth`` products per output) cannot overflow
  on any int8 input. The quantizer guarantees it, the NPU compiler places only layers
  that meet it, and one that does not (a hand-made network) wraps modulo ``2**32`` on every
  backend, as the engine's adders do (`wrap_int32`).
* Float to int8 (the edge ``Cast``): ``q = clamp(rint(x / s), -128, 127)`` in float64,
  ties to even (`quantize`); int8 to float: ``float32(q) * float32(s)`` (`dequantize`).
"""

from __future__ import annotations

import math

import numpy as np

from xrt.errors import ErrorCode, XrtError

__all__ = [
    "ACC_INPUT_MAX",
    "ACC_MAX",
    "ACC_MIN",
    "INT8_MAX",
    "INT8_MIN",
    "MULTIPLIER_BITS",
    "MULTIPLIER_MAX",
    "MULTIPLIER_MIN",
    "SHIFT_MAX",
    "WEIGHT_QMAX",
    "accumulator_bound",
    "accumulator_headroom",
    "check_multiplier",
    "dequantize",
    "quantize",
    "quantize_bias",
    "quantize_multiplier",
    "quantize_multiplier_pair",
    "quantize_scalar",
    "requantize",
    "rounding_shift_right",
    "symmetric_scale",
    "wrap_int32",
]

INT8_MIN = -128
"""Lowest int8 activation value."""
INT8_MAX = 127
"""Highest int8 activation value."""
WEIGHT_QMAX = 127
"""Weights are quantized to ``[-127, 127]`` (symmetric: -128 is never used)."""
ACC_MIN = -(2**31)
"""Lowest int32 accumulator value."""
ACC_MAX = 2**31 - 1
"""Highest int32 accumulator value."""
ACC_INPUT_MAX = -INT8_MIN
"""Largest magnitude of an int8 activation (128), the factor of the accumulator bound."""
MULTIPLIER_BITS = 15
"""Significant bits of a requantisation multiplier (it fits a signed 16-bit register)."""
MULTIPLIER_MIN = 1 << (MULTIPLIER_BITS - 1)
"""Smallest normalised multiplier, 2**14."""
MULTIPLIER_MAX = (1 << MULTIPLIER_BITS) - 1
"""Largest multiplier, 2**15 - 1."""
SHIFT_MAX = 46
"""Largest right shift. With ``S >= 47`` every int32 accumulator would requantize to 0."""


def symmetric_scale(amax: float, qmax: int = INT8_MAX) -> float:
    """Scale of a symmetric quantization of the range ``[-amax, amax]``: ``amax / qmax``.

    A zero (or non-finite) range gets scale 1.0: every value of such a tensor is 0, and any
    positive scale represents it exactly.
    """
    amax = float(amax)
    if not math.isfinite(amax) or amax <= 0.0:
        return 1.0
    return amax / qmax


def quantize_multiplier(real: float) -> tuple[int, int]:
    """Return ``(M, S)`` with ``real ~= M * 2**-S`` (docs/quantization.md, "Multipliers").

    ``real = m * 2**e`` with ``0.5 <= m < 1`` (frexp); ``M = round_half_even(m * 2**15)``; when
    rounding reaches ``2**15``, ``M = 2**14`` and ``e += 1``; ``S = 15 - e``. A factor below
    ``2**-32`` (``S > 46``) gives ``(0, 0)``: it would map every int32 accumulator to 0.

    Args:
        real: The rescale factor, finite and >= 0.

    Returns:
        ``(M, S)``, ``M`` in ``[2**14, 2**15 - 1]`` (or 0) and ``S`` in ``[0, 46]``.

    Raises:
        XrtError: 11003 when `real` is negative, not finite, or ``>= 2**15 - 0.5`` (it cannot be
            represented with a non-negative shift).
    """
    real = float(real)
    if not math.isfinite(real) or real < 0.0:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"rescale factor must be finite and >= 0: {real!r}")
    if real == 0.0:
        return 0, 0
    mant, exp = math.frexp(real)
    mult = round(mant * (1 << MULTIPLIER_BITS))  # exact product; round() ties to even
    if mult == 1 << MULTIPLIER_BITS:
        mult = MULTIPLIER_MIN
        exp += 1
    shift = MULTIPLIER_BITS - exp
    if shift < 0:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"rescale factor {real!r} is too large for a {MULTIPLIER_BITS}-bit multiplier "
            "with a right shift",
        )
    if shift > SHIFT_MAX:
        return 0, 0
    return int(mult), int(shift)


def quantize_multiplier_pair(real_a: float, real_b: float) -> tuple[int, int, int]:
    """Two factors sharing one shift (for Add): ``(M_a, M_b, S)``.

    The larger factor is quantized with `quantize_multiplier`; the other one uses the same
    shift: ``M = round_half_even(real * 2**S)``, which never exceeds the larger multiplier.
    """
    big = max(float(real_a), float(real_b))
    m_big, shift = quantize_multiplier(big)
    if m_big == 0:
        return 0, 0, 0

    def at_shift(real: float) -> int:
        return round(math.ldexp(float(real), shift))

    return at_shift(real_a), at_shift(real_b), shift


def check_multiplier(multiplier: int, shift: int, what: str = "requantisation") -> None:
    """XrtError 11003 unless ``0 <= M <= 2**15 - 1`` and ``0 <= S <= 46``."""
    if not (0 <= int(multiplier) <= MULTIPLIER_MAX and 0 <= int(shift) <= SHIFT_MAX):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{what}: multiplier {multiplier} / shift {shift} outside [0, {MULTIPLIER_MAX}] / "
            f"[0, {SHIFT_MAX}]",
        )


def rounding_shift_right(x: np.ndarray, shift: np.ndarray | int) -> np.ndarray:
    """``(x + 2**(S-1)) >> S`` (``x`` itself where ``S == 0``), int64, ties towards +infinity.

    Args:
        x: Integer array (converted to int64).
        shift: Shift(s) in ``[0, 62]``, broadcastable to `x`.
    """
    x = np.asarray(x, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    if s.size and (s.min() < 0 or s.max() > 62):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE, f"shift must be in [0, 62], got {s.min()}..{s.max()}"
        )
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s, 1) - 1), 0)
    return np.right_shift(x + half, s)


def requantize(
    acc: np.ndarray,
    multiplier: np.ndarray | int,
    shift: np.ndarray | int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
) -> np.ndarray:
    """``clamp((acc * M + 2**(S-1)) >> S, lo, hi)`` as int8 (docs/quantization.md).

    Args:
        acc: int32-range accumulators (any integer dtype; computed in int64).
        multiplier: ``M``, scalar or broadcastable (per channel).
        shift: ``S``, scalar or broadcastable.
        lo: Lower saturation bound (``-128``, or the quantized ReLU/Clip minimum).
        hi: Upper saturation bound.

    Returns:
        int8 array of the broadcast shape.
    """
    prod = np.asarray(acc, dtype=np.int64) * np.asarray(multiplier, dtype=np.int64)
    return np.clip(rounding_shift_right(prod, shift), lo, hi).astype(np.int8)


def quantize(x: np.ndarray, scale: float, lo: int = INT8_MIN, hi: int = INT8_MAX) -> np.ndarray:
    """Float to int8: ``clamp(rint(float64(x) / float64(scale)), lo, hi)``; NaN becomes 0.

    ``rint`` rounds half to even (IEEE). The division is one float64 division, so the result
    is the same on every IEEE-754 machine.
    """
    q = np.rint(np.asarray(x, dtype=np.float64) / float(scale))
    q = np.nan_to_num(q, nan=0.0, posinf=hi, neginf=lo)
    return np.clip(q, lo, hi).astype(np.int8)


def quantize_scalar(value: float, scale: float, lo: int = INT8_MIN, hi: int = INT8_MAX) -> int:
    """`quantize` of one number, as a Python int (used for ReLU/Clip bounds and pad values)."""
    return int(quantize(np.array([value]), scale, lo, hi)[0])


def dequantize(q: np.ndarray, scale: float) -> np.ndarray:
    """int8 to float: ``float32(q) * float32(scale)`` (one float32 multiply)."""
    return np.asarray(q).astype(np.float32) * np.float32(scale)


def quantize_bias(bias: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """int32 bias: ``clamp(rint(float64(b) / float64(s_in * s_w[c])), int32)``."""
    q = np.rint(np.asarray(bias, dtype=np.float64) / np.asarray(scale, dtype=np.float64))
    return np.clip(np.nan_to_num(q, nan=0.0), ACC_MIN, ACC_MAX).astype(np.int32)


def accumulator_headroom(weight: np.ndarray) -> np.ndarray:
    """Per output channel (axis 0), how large ``|bias|`` may be while the accumulator bound
    holds: ``ACC_MAX - 128 * sum|w[o]|`` (int64; negative when the weights alone break it).

    ``128 * sum|w[o]|`` is the largest ``|sum x * w[o]|`` over int8 inputs ``x``; with
    weights in ``[-127, 127]`` it is at most ``depth * 127 * 128``, ``depth`` the number
    of products per output (``C/g * kh * kw`` for a convolution, ``K`` for a dense layer).
    """
    w = np.abs(np.asarray(weight).astype(np.int64)).reshape(weight.shape[0], -1).sum(axis=1)
    return ACC_MAX - ACC_INPUT_MAX * w


def accumulator_bound(weight: np.ndarray, bias: np.ndarray) -> int:
    """Largest ``|acc|`` any int8 input can produce: ``max_o |b[o]| + 128 * sum|w[o]|``.

    The bound holds (no int8 input can leave int32) exactly when this is ``<= ACC_MAX``.
    """
    b = np.abs(np.asarray(bias).astype(np.int64))
    return int((ACC_MAX - accumulator_headroom(weight) + b).max(initial=0))


def wrap_int32(acc: np.ndarray) -> np.ndarray:
    """Exact integer sums reduced to int32 two's complement, modulo ``2**32`` (int64 result):
    what the engine's 32-bit adders hold whatever the order of the additions."""
    a = np.asarray(acc, dtype=np.int64)
    return ((a - ACC_MIN) & 0xFFFFFFFF) + ACC_MIN
