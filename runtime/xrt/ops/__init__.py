"""Operators: the registry of op types, their type inference and their numpy host kernels.

Each op type has one `OpDef` (see `get_op_def`) with an attribute schema, type inference and
a kernel ``forward(op, inputs, params) -> outputs``. Families live in one module each:

==================  ==========================================================
module              op types
==================  ==========================================================
conv                Conv2d, QConv2d
pool                MaxPool2d, MaxPool2dIndices, AvgPool2d, GlobalAvgPool, QAvgPool2d,
                    QGlobalAvgPool
pool3d              MaxPool3d, AvgPool3d (host only)
convtranspose       ConvTranspose2d
conv3d              ConvTranspose3d (host only)
activation          Relu, Clip, LeakyRelu, Sigmoid, HardSwish, HardSigmoid, QClip, QLut
elementwise         Add, Mul, Concat, QAdd, QMul, QConcat
mathops             unary math (Sqrt, Exp, Erf, Gelu...), Sub, Div, Pow, comparisons, Sum,
                    Max, Min, Mean, Where
reduce              ReduceMean, ReduceSum, ReduceMax... ArgMax, ArgMin
index               Slice, Split, Gather, Expand, Tile, DepthToSpace, SpaceToDepth
shape               Reshape, Squeeze, Unsqueeze, Flatten, Transpose, Identity, Constant
gemm                Gemm, MatMul, QGemm
norm                BatchNorm, BatchNormTrain, LRN, LayerNorm, InstanceNorm
softmax             Softmax
dropout             Dropout (training mode; inference-mode Dropout is removed on import)
resize              Resize (nearest, linear, cubic)
pad                 Pad
cast                Cast (also quantize / dequantize)
hardop_placeholder  HardOp (NPU program placeholder)
boundary            Input, Output (a network's two ends: they compute nothing)
==================  ==========================================================

Op types starting with ``Q`` are the integer-only kernels of docs/quantization.md; their
arithmetic primitives are in `xrt.ops.intmath`.
"""

from xrt.ops import (  # noqa: F401  (importing registers the op types)
    activation,
    boundary,
    cast,
    conv,
    conv3d,
    convtranspose,
    dropout,
    elementwise,
    gemm,
    hardop_placeholder,
    index,
    intmath,
    mathops,
    norm,
    pad,
    pool,
    pool3d,
    reduce,
    resize,
    shape,
    softmax,
)
from xrt.ops._registry import (
    REQUIRED,
    AttrSpec,
    ForwardFn,
    InferFn,
    OpDef,
    OpLike,
    get_op_def,
    op_types,
    register_op,
)
from xrt.ops.boundary import BOUNDARY_OP_TYPES, is_boundary, passed_values, refuse_boundary

__all__ = [
    "BOUNDARY_OP_TYPES",
    "REQUIRED",
    "AttrSpec",
    "ForwardFn",
    "InferFn",
    "OpDef",
    "OpLike",
    "get_op_def",
    "intmath",
    "is_boundary",
    "op_types",
    "passed_values",
    "refuse_boundary",
    "register_op",
]
