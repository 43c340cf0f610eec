"""The integer primitives of docs/quantization.md against exact rational arithmetic.

Each reference below is written from the document's formulas with Python integers and
`fractions.Fraction`, independently of the numpy implementation in `xrt.ops.intmath`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xrt.errors import ErrorCode, XrtError
from xrt.ops import intmath

INT32 = st.integers(-(2**31), 2**31 - 1)


def ref_round_half_even(f: Fraction) -> int:
    lo = math.floor(f)
    diff = f - lo
    if diff > Fraction(1, 2) or (diff == Fraction(1, 2) and lo % 2 == 1):
        return lo + 1
    return lo


def ref_quantize_multiplier(real: float) -> tuple[int, int]:
    """Doc: M in [2^14, 2^15), M * 2^-S nearest to real (ties to even), S in [0, 46]."""
    r = Fraction(real)
    if r == 0:
        return 0, 0
    s = 0
    while r * 2**s < 2**14:
        s += 1
    while r * 2**s >= 2**15:
        s -= 1
    m = ref_round_half_even(r * 2**s)
    if m == 2**15:
        m, s = 2**14, s - 1
    if s < 0:
        raise OverflowError
    if s > 46:
        return 0, 0
    return m, s


def ref_shift(x: int, s: int) -> int:
    """Doc: floor((x + 2^(S-1)) / 2^S), i.e. round half towards +infinity; x itself for S = 0."""
    if s == 0:
        return x
    return math.floor(Fraction(x, 2**s) + Fraction(1, 2))


def ref_requantize(acc: int, m: int, s: int, lo: int = -128, hi: int = 127) -> int:
    return min(max(ref_shift(acc * m, s), lo), hi)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=2.0**-40, max_value=2.0**15 - 1, allow_nan=False, allow_infinity=False))
@example(1.0)
@example(0.5)
@example(2.0**-32)
@example(2.0**-33)
@example((2**15 - 0.5) / 2**15)  # rounds up to 2^15: renormalised
@example((2**14 + 0.5) / 2**20)  # an exact tie: stays even
@example((2**14 + 1.5) / 2**20)  # an exact tie: rounds up to even
def test_quantize_multiplier_matches_exact_derivation(real: float) -> None:
    try:
        want = ref_quantize_multiplier(real)
    except OverflowError:
        with pytest.raises(XrtError) as err:
            intmath.quantize_multiplier(real)
        assert err.value.code == ErrorCode.OUT_OF_RANGE
        return
    got = intmath.quantize_multiplier(real)
    assert got == want
    m, s = got
    if m:
        assert intmath.MULTIPLIER_MIN <= m <= intmath.MULTIPLIER_MAX and 0 <= s <= intmath.SHIFT_MAX
        # Relative error of the representation is at most half a unit in 2^15.
        assert abs(Fraction(m, 2**s) - Fraction(real)) <= Fraction(1, 2 ** (s + 1))


def test_quantize_multiplier_rejects_what_it_cannot_represent() -> None:
    for bad in (-1.0, float("nan"), float("inf"), 2.0**15, 40000.0):
        with pytest.raises(XrtError) as err:
            intmath.quantize_multiplier(bad)
        assert err.value.code == ErrorCode.OUT_OF_RANGE
    assert intmath.quantize_multiplier(0.0) == (0, 0)
    assert intmath.quantize_multiplier(2.0**-50) == (0, 0)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**46), 2**46), st.integers(0, 46))
@example(-3, 1)  # -1.5 -> -1 (half towards +inf)
@example(3, 1)  # 1.5 -> 2
@example(-5, 1)  # -2.5 -> -2
@example(-1, 1)  # -0.5 -> 0
@example(2**46, 46)
@example(-(2**46), 46)
def test_rounding_shift_right(x: int, s: int) -> None:
    assert int(intmath.rounding_shift_right(np.array([x]), s)[0]) == ref_shift(x, s)


def test_rounding_ties_go_towards_plus_infinity() -> None:
    x = np.array([-7, -6, -5, -3, -1, 1, 3, 5, 7], dtype=np.int64)
    np.testing.assert_array_equal(
        intmath.rounding_shift_right(x, 1), [-3, -3, -2, -1, 0, 1, 2, 3, 4]
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(INT32, min_size=1, max_size=20),
    st.integers(0, intmath.MULTIPLIER_MAX),
    st.integers(0, intmath.SHIFT_MAX),
    st.integers(-128, 127),
    st.integers(-128, 127),
)
@example([2**31 - 1, -(2**31)], intmath.MULTIPLIER_MAX, 0, -128, 127)  # saturates both ways
@example([2**31 - 1, -(2**31)], intmath.MULTIPLIER_MAX, 46, -128, 127)  # largest product
def test_requantize(accs: list[int], m: int, s: int, a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    got = intmath.requantize(np.array(accs, dtype=np.int32), m, s, lo, hi)
    assert got.dtype == np.int8
    assert got.tolist() == [ref_requantize(v, m, s, lo, hi) for v in accs]


def test_requantize_per_channel_broadcast() -> None:
    acc = np.arange(-40, 40, dtype=np.int64).reshape(1, 4, 20)
    m = np.array([16384, 20000, 30000, 32767]).reshape(1, 4, 1)
    s = np.array([15, 16, 10, 20]).reshape(1, 4, 1)
    got = intmath.requantize(acc, m, s)
    want = [
        [
            [ref_requantize(int(acc[0, c, i]), int(m[0, c, 0]), int(s[0, c, 0])) for i in range(20)]
            for c in range(4)
        ]
    ]
    assert got.tolist() == want


def ref_quantize(x: float, scale: float, lo: int = -128, hi: int = 127) -> int:
    """Doc: clamp(round_half_even(x / s)), the division in float64."""
    if math.isnan(x):
        return 0
    q = x / scale
    if math.isinf(q):
        return hi if q > 0 else lo
    return min(max(ref_round_half_even(Fraction(q)), lo), hi)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(width=32, allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-6, max_value=10.0, allow_nan=False),
)
@example(1.25, 0.5)  # 2.5 -> 2 (ties to even)
@example(1.75, 0.5)  # 3.5 -> 4
@example(-1.25, 0.5)  # -2.5 -> -2
@example(200.0, 1.0)  # saturates
def test_quantize_float_to_int8(x: float, scale: float) -> None:
    got = int(intmath.quantize(np.array([x], dtype=np.float32), scale)[0])
    assert got == ref_quantize(float(np.float32(x)), scale)


@settings(max_examples=100, deadline=None)
@given(st.integers(-128, 127), st.floats(min_value=1e-6, max_value=10.0))
def test_dequantize_is_one_float32_multiply(q: int, scale: float) -> None:
    got = intmath.dequantize(np.array([q], dtype=np.int8), scale)
    assert got.dtype == np.float32
    assert got[0] == np.float32(np.float32(q) * np.float32(scale))


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-6, max_value=100.0), st.floats(min_value=1e-6, max_value=100.0))
def test_multiplier_pair_shares_one_shift(ra: float, rb: float) -> None:
    ma, mb, s = intmath.quantize_multiplier_pair(ra, rb)
    big = max(ra, rb)
    m_big, s_big = ref_quantize_multiplier(big)
    assert s == s_big and max(ma, mb) == m_big
    small, m_small = (rb, mb) if ra >= rb else (ra, ma)
    assert m_small == ref_round_half_even(Fraction(small) * 2**s)
    assert 0 <= min(ma, mb) <= max(ma, mb) <= intmath.MULTIPLIER_MAX


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=8), st.floats(min_value=1e-5, max_value=1.0)
)
def test_quantize_bias(bias: list[float], scale: float) -> None:
    got = intmath.quantize_bias(np.array(bias, dtype=np.float32), np.float64(scale))
    want = [
        max(min(ref_round_half_even(Fraction(float(np.float32(b)) / scale)), 2**31 - 1), -(2**31))
        for b in bias
    ]
    assert got.dtype == np.int32 and got.tolist() == want
