"""What the importer does not take of each supported ONNX operator (one line each), and
which of their parameter inputs may be fed at run time.

Feeds the generated page docs/onnx-operators.md (tools/generate.py). Inputs listed in
`ONNX_FED_INPUTS` may be graph inputs without initializers: the host reads them at each
forward (weights, shapes, axes, pads, scales, bounds; output shapes they decide are
resolved then), while an initializer or a foldable constant stays a constant. The NPU
backends take only operators whose parameters are constants.
"""

from __future__ import annotations

__all__ = ["ONNX_FED_INPUTS", "ONNX_OP_LIMITS"]

_BINARY = "same element type on both sides (Pow: any exponent type)"

ONNX_OP_LIMITS: dict[str, str] = {
    "Abs": "",
    "Add": "numeric types; int8 only as the quantizer's QAdd",
    "And": "",
    "ArgMax": "an empty axis is refused (ONNX leaves it undefined)",
    "ArgMin": "an empty axis is refused (ONNX leaves it undefined)",
    "AveragePool": "1-D and 2-D; 3-D on the host",
    "BatchNormalization": "inference mode folded into a preceding Conv when both have "
    "constant parameters; training_mode 1 (batch statistics, running ones updated) on the host",
    "Cast": "float -> int truncates; no STRING or float8 targets",
    "Ceil": "float",
    "Clip": "float or plain integer; min > max gives max",
    "Concat": "",
    "Conv": "1-D and 2-D",
    "ConvTranspose": "1-D and 2-D; 3-D on the host",
    "Cos": "float",
    "DepthToSpace": "4-D input",
    "Div": _BINARY + "; integer division truncates, by zero is an error",
    "Dropout": "inference mode is removed (the mask all True); training mode draws the mask "
    "with numpy's RandomState(seed), as ONNX's reference does",
    "Elu": "float",
    "Equal": _BINARY,
    "Erf": "float",
    "Exp": "float",
    "Expand": "",
    "Flatten": "",
    "Floor": "float",
    "Gather": "indices INT32/INT64, out of range is an error at run time",
    "Gelu": "float",
    "Gemm": "constant 2-D B becomes a dense layer (int8 capable); otherwise MatMul + Add",
    "GlobalAveragePool": "",
    "GlobalMaxPool": "",
    "Greater": _BINARY,
    "GreaterOrEqual": _BINARY,
    "HardSigmoid": "float",
    "HardSwish": "float",
    "Identity": "",
    "InstanceNormalization": "",
    "LRN": "float",
    "LayerNormalization": "stash_type float only",
    "LeakyRelu": "float",
    "Less": _BINARY,
    "LessOrEqual": _BINARY,
    "Log": "float",
    "LogSoftmax": "float",
    "MatMul": "constant 2-D right operand becomes a dense layer",
    "Max": "",
    "MaxPool": "1-D and 2-D; 3-D on the host (without Indices)",
    "Mean": "float",
    "Min": "",
    "Mish": "float",
    "Mod": _BINARY,
    "Mul": "numeric types; int8 only as the quantizer's QMul",
    "Neg": "",
    "Not": "",
    "Or": "",
    "PRelu": "",
    "Pad": "modes constant, reflect, edge, wrap; no negative pads",
    "Pow": _BINARY,
    "Reciprocal": "float",
    "ReduceL1": "",
    "ReduceL2": "",
    "ReduceLogSumExp": "",
    "ReduceMax": "",
    "ReduceMean": "over an empty set: 0 (ONNX leaves it undefined)",
    "ReduceMin": "",
    "ReduceProd": "",
    "ReduceSum": "",
    "ReduceSumSquare": "",
    "Relu": "",
    "Reshape": "",
    "Resize": "nearest, linear, cubic (antialias included); tf_crop_and_resize on the host",
    "Round": "float",
    "Selu": "float",
    "Sigmoid": "float",
    "Sign": "",
    "Sin": "float",
    "Slice": "",
    "Softmax": "float",
    "Softplus": "float",
    "Softsign": "float",
    "SpaceToDepth": "4-D input",
    "Split": "",
    "Sqrt": "float",
    "Squeeze": "",
    "Sub": _BINARY,
    "Sum": "float sums become a chain of Add (QAdd when quantized)",
    "Tanh": "float",
    "ThresholdedRelu": "float",
    "Tile": "",
    "Transpose": "",
    "Unsqueeze": "",
    "Upsample": "nearest and linear",
    "Where": "Bool condition",
    "Xor": "",
}
"""ONNX op type -> limits of the importer (empty: the whole operator)."""

_AXES = ("axes",)

ONNX_FED_INPUTS: dict[str, tuple[str, ...]] = {
    "BatchNormalization": ("scale", "B", "input_mean", "input_var"),
    "Clip": ("min", "max"),
    "Conv": ("W", "B"),
    "ConvTranspose": ("W", "B"),
    "Dropout": ("ratio", "training_mode"),
    "Expand": ("shape",),
    "InstanceNormalization": ("scale", "B"),
    "LayerNormalization": ("Scale", "B"),
    "Pad": ("pads", "constant_value", "axes"),
    "ReduceL1": _AXES,
    "ReduceL2": _AXES,
    "ReduceLogSumExp": _AXES,
    "ReduceMax": _AXES,
    "ReduceMean": _AXES,
    "ReduceMin": _AXES,
    "ReduceProd": _AXES,
    "ReduceSum": _AXES,
    "ReduceSumSquare": _AXES,
    "Reshape": ("shape",),
    "Resize": ("roi", "scales", "sizes"),
    "Slice": ("starts", "ends", "axes", "steps"),
    "Split": ("split",),
    "Squeeze": _AXES,
    "Tile": ("repeats",),
    "Unsqueeze": _AXES,
    "Upsample": ("scales",),
}
"""ONNX op type -> its parameter inputs (ONNX schema names) that may be fed at run time:
graph inputs without initializers, read by the host at each forward. Data inputs (a
MatMul's operands, Gemm's B and C, a PRelu slope...) are values anyway."""
