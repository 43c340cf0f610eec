"""Operators: the registry of op types, their type inference and their numpy host kernels.

Each op type has one `OpDef` (see `get_op_def`) with an attribute schema, type inference and
a kernel ``forward(op, inputs, params) -> outputs``. Families live in one module each:

==============  ==============================================================
module          op types
==============  ==============================================================
conv            Conv2d, QConv2d
pool            MaxPool2d, AvgPool2d, GlobalAvgPool, QAvgPool2d, QGlobalAvgPool
activation      Relu, Clip, LeakyRelu, Sigmoid, HardSwish, HardSigmoid, QClip, QLut
elementwise     Add, Mul, Concat, QAdd, QMul, QConcat
shape           Reshape, Flatten, Transpose, Identity, Constant
gemm            Gemm, MatMul, QGemm
norm            BatchNorm
softmax         Softmax
resize          Resize (nearest)
pad             Pad
cast            Cast (also quantize / dequantize)
hardop          HardOp (NPU program placeholder)
==============  ==============================================================

Op types starting with ``Q`` are the integer-only kernels of docs/quantization.md; their
arithmetic primitives are in `xrt.ops.intmath`.
"""

from xrt.ops import (  # noqa: F401  (importing registers the op types)
    activation,
    cast,
    conv,
    elementwise,
    gemm,
    hardop,
    intmath,
    norm,
    pad,
    pool,
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

__all__ = [
    "REQUIRED",
    "AttrSpec",
    "ForwardFn",
    "InferFn",
    "OpDef",
    "OpLike",
    "get_op_def",
    "intmath",
    "op_types",
    "register_op",
]
