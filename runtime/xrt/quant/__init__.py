"""Integer-only quantization: calibration, the quantizer and the arithmetic primitives.

* `calibrate` records each value's range over sample inputs.
* `quantize_network` (`quantize_with_report`: with what it changed to keep the int32
  accumulator bound) turns a float network into an int8 one whose integer kernels
  (``QConv2d``, ``QAdd``... in `xrt.ops`) follow docs/quantization.md bit for bit.
* The primitives (`quantize_multiplier`, `requantize`, ...) live in `xrt.ops.intmath` and
  are re-exported here.
"""

from xrt.ops.intmath import (
    dequantize,
    quantize,
    quantize_bias,
    quantize_multiplier,
    quantize_multiplier_pair,
    requantize,
    rounding_shift_right,
    symmetric_scale,
)
from xrt.quant.accumulator import QuantReport
from xrt.quant.calibrate import Samples, ValueRange, calibrate
from xrt.quant.quantizer import (
    INT_SUFFIX,
    quantize_network,
    quantize_weight_per_channel,
    quantize_with_report,
)

__all__ = [
    "INT_SUFFIX",
    "QuantReport",
    "Samples",
    "ValueRange",
    "calibrate",
    "dequantize",
    "quantize",
    "quantize_bias",
    "quantize_multiplier",
    "quantize_multiplier_pair",
    "quantize_network",
    "quantize_weight_per_channel",
    "quantize_with_report",
    "requantize",
    "rounding_shift_right",
    "symmetric_scale",
]
