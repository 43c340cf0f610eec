"""The NPU compiler: runs of quantized operators -> programs for the compute engine.

Passes as small functions over plain data (each testable alone):

* `refusal` (legalize): None, or why an operator must stay on the host; the op types the
  NPU runs, each with its check and lowering, are one table (`_op_table`, `NPU_OP_TYPES`);
* `conv_blocks`, `bias_rows`, `prm_rows`, `lut_rows` (pack) into one `ConstBlob`;
* placement (in `compile_run`): base register per input, output, constants, scratch;
* `plan_conv` (tile): the printable tiling of a convolution or dense layer
  (`conv_candidates`: every tiling that fits, which tuning measures);
* the emitters (`xrt.npu.compiler._conv`, `._vector`) and `insert_tokens`.

`compile_run` runs them all over a `NetworkView` and returns an `NpuProgram`; `to_tiled` /
`from_tiled` convert host tensors to and from the channel-tiled layout of its inputs and
outputs.
"""

from xrt.npu.compiler._compile import Plans, compile_run, tiled_geoms
from xrt.npu.compiler._golden_run import run_on_golden, simulated_cycles
from xrt.npu.compiler._layout import View, as_nchw, from_tiled, tiled_bytes, to_tiled, view_of
from xrt.npu.compiler._legalize import accumulator_bound
from xrt.npu.compiler._op_table import NPU_OP_TYPES, is_alias, refusal
from xrt.npu.compiler._pack import ConstBlob, bias_rows, conv_blocks, lut_rows, prm_rows
from xrt.npu.compiler._program import (
    BaseRole,
    LayerReport,
    NpuProgram,
    TensorBinding,
    TensorPlacement,
)
from xrt.npu.compiler._simulate import partition
from xrt.npu.compiler._tiler import ConvGeom, ConvPlan, PlanChoice, conv_candidates, plan_conv
from xrt.npu.compiler._tokens import Step, insert_tokens

__all__ = [
    "NPU_OP_TYPES",
    "BaseRole",
    "ConstBlob",
    "ConvGeom",
    "ConvPlan",
    "LayerReport",
    "NpuProgram",
    "PlanChoice",
    "Plans",
    "Step",
    "TensorBinding",
    "TensorPlacement",
    "View",
    "accumulator_bound",
    "as_nchw",
    "bias_rows",
    "compile_run",
    "conv_blocks",
    "conv_candidates",
    "from_tiled",
    "insert_tokens",
    "is_alias",
    "lut_rows",
    "partition",
    "plan_conv",
    "prm_rows",
    "refusal",
    "run_on_golden",
    "simulated_cycles",
    "tiled_bytes",
    "tiled_geoms",
    "to_tiled",
    "view_of",
]
