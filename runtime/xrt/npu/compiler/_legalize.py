"""Legalize: the checks that say whether the compute engine runs an operator exactly.

Each check returns None when the compiler can lower the operator bit-exactly within the
buffers and instruction fields, else a sentence naming the reason. `operand_refusal` holds
what every operator must meet (int8, a channel-tiled rank, rows a loop counts and a buffer
half holds); the `check_*` functions what one operator family needs beyond it. The table of
`xrt.npu.compiler._op_table` says which check belongs to which op type, and its `refusal`
runs them. A backend's constraint binds a refused operator to the host: the NPU never gives
a silently wrong answer. In particular a convolution or dense layer is refused unless its
int32 accumulator provably cannot overflow (`xrt.ops.intmath.accumulator_bound`, the bound
the quantizer keeps by construction). Beyond it the engine and the host kernels both wrap
modulo 2**32, but the NPU is kept to layers whose answer does not depend on wrapping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.hw.config import NpuConfig
from xrt.network import Operator
from xrt.npu.compiler._emit import MAX_COUNT, Emitter
from xrt.npu.compiler._geometry import conv_geom, gemm_geom, pool_window
from xrt.npu.compiler._layout import as_nchw, view_of
from xrt.npu.compiler._movement import channel_permutation, flatten_fits, selection
from xrt.npu.compiler._tiler import plan_conv
from xrt.npu.compiler._vector import pool_tile_rows
from xrt.ops.intmath import ACC_MAX, accumulator_bound

__all__ = [
    "Check",
    "accumulator_bound",
    "check_binary",
    "check_concat",
    "check_conv",
    "check_gemm",
    "check_pad",
    "check_reshape",
    "check_resize",
    "check_transpose",
    "check_window",
    "operand_refusal",
    "reshape_kind",
]

Types = Sequence[TensorType]
Params = Mapping[str, np.ndarray]

Check = Callable[[Operator, Types, Types, Params, NpuConfig], str | None]
"""An operator family's check: ``(op, input types, output types, params, cfg)`` -> None
when the compiler lowers it exactly, else why not."""

_PAD_MAX = 15


def reshape_kind(src: tuple[int, ...], dst: tuple[int, ...]) -> str | None:
    """How a Reshape / Flatten / Identity of `src` into `dst` runs on the NPU: ``"alias"``
    (the channel-tiled bytes are the same: no instructions), ``"flatten"`` (``(N, C, H, W)
    -> (N, C*H*W)`` with ``H*W > 1``: features are moved across lanes, see
    `xrt.npu.compiler._movement.emit_flatten`) or None (no lowering)."""
    if len(src) not in (2, 4, 5) or len(dst) not in (2, 4, 5):
        return None
    ni, ci, hi, wi = as_nchw(src)
    no, co, ho, wo = as_nchw(dst)
    if (ni, ci, hi, wi) == (no, co, ho, wo) or ((ni, ci) == (no, co) and hi * wi == ho * wo == 1):
        return "alias"
    if len(src) == 4 and len(dst) == 2 and (no, co) == (ni, ci * hi * wi):
        return "flatten"
    return None


def operand_refusal(
    op_type: str, ins: Types, outs: Types, cfg: NpuConfig, rank5: bool = False
) -> str | None:
    """What every operator's tensors must meet: int8, a rank with the channel-tiled layout
    (2 and 4; 5, ``(N, G, C/G, H, W)``, only where `rank5`: operators that just move
    channels), rows that a loop counts and a buffer half holds, pixel strides a LOAD holds."""
    for t in [*ins, *outs]:
        if t.dtype is not DataType.SINT8:
            return f"operates on {t.dtype.manual_name}, the NPU only on int8"
        if 0 in t.shape:
            return f"zero-size tensor {list(t.shape)}: nothing for the NPU to compute"
        if not (len(t.shape) in (2, 4) or (len(t.shape) == 5 and rank5)):
            return f"rank {len(t.shape)} tensors have no channel-tiled layout for {op_type}"
    for t in [*ins, *outs]:
        n, _, _, w = as_nchw(t.shape)
        cols = w if len(t.shape) == 4 else n
        if cols > MAX_COUNT or 2 * cols > cfg.inp_rows // 2 or cols > cfg.acc_rows // 2:
            return f"rows of {cols} pixels exceed what a loop counts or a buffer half holds"
        if len(t.shape) == 2 and -(-t.shape[1] // cfg.block) * cfg.block >= 2**16:
            return f"{t.shape[1]} features: a pixel stride beyond a LOAD's 16-bit field"
    return None


def check_conv(op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig) -> str | None:
    a = op.attrs
    if len(ins[0].shape) != 4:
        return "QConv2d needs a rank-4 input"
    if max(a["pads"]) > _PAD_MAX:
        return f"pads {a['pads']} exceed the {_PAD_MAX} a LOAD can insert"
    bound = accumulator_bound(params["weight"], params["bias"])
    if bound > ACC_MAX:
        return f"int32 accumulator bound {bound} cannot be proven (> 2**31 - 1)"
    plan = plan_conv(conv_geom(op, ins[0], params, cfg), cfg)
    return plan if isinstance(plan, str) else None


def check_gemm(op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig) -> str | None:
    bound = accumulator_bound(params["weight"], params["bias"])
    if bound > ACC_MAX:
        return f"int32 accumulator bound {bound} cannot be proven (> 2**31 - 1)"
    plan = plan_conv(gemm_geom(ins[0], params, cfg), cfg)
    return plan if isinstance(plan, str) else None


def check_binary(
    op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig
) -> str | None:
    sa, sb = ins[0].shape, ins[1].shape
    if sa == sb:
        return None
    if len(sa) == 4 and len(sb) == 4:
        big, small = (sa, sb) if sa == outs[0].shape else (sb, sa)
        if (
            big == outs[0].shape
            and small[1] == big[1]
            and small[2:] == (1, 1)
            and small[0] in (1, big[0])
        ):
            return None
    return f"broadcast {list(sa)} with {list(sb)} is not per-channel over pixels"


def check_window(
    op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig
) -> str | None:
    a = op.attrs
    if len(ins[0].shape) != 4:
        return "pooling needs a rank-4 input"
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr = pool_window(a)
    _, _, h, w = ins[0].shape
    ho, wo = outs[0].shape[2:]
    extra_b = (ho - 1) * sh + (kh - 1) * dh - pt - (h - 1)
    extra_r = (wo - 1) * sw + (kw - 1) * dw - pl - (w - 1)
    if max(pt, pl, extra_b, extra_r) > _PAD_MAX:
        return f"padding beyond {_PAD_MAX} rows/columns"
    xv = view_of(ins[0].shape, 1, 0, 0, cfg.block)
    if pool_tile_rows(Emitter(cfg), xv, ho, wo, (kh, kw, sh, sw, dh, dw, pt, pl, pb, pr)) < 1:
        return "one output row of the window does not fit the buffers"
    return None


def check_concat(
    op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig
) -> str | None:
    a = op.attrs
    rank = len(outs[0].shape)
    axis = a["axis"] % rank
    if axis != 1:
        return f"concatenation along axis {a['axis']} (only channels are supported)"
    planes = sum(-(-t.shape[1] // cfg.block) for t in ins)
    if 2 * planes > cfg.wgt_rows // 2:
        return f"{len(ins)} inputs of {planes} channel blocks need too many selection blocks"
    _, c, _, w = as_nchw(outs[0].shape)
    if planes * w > cfg.inp_rows // 2 or -(-c // cfg.block) * w > cfg.acc_rows // 2:
        return "one row of all inputs does not fit the buffers"
    if op.op_type == "QConcat" and -(-c // cfg.block) > cfg.prm_rows // 2:
        return f"{c} output channels need more PRM rows than half the buffer"
    return None


def check_pad(op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig) -> str | None:
    a = op.attrs
    if a["mode"] != "constant":
        return f"pad mode {a['mode']} (only constant)"
    if int(a["value"]) not in (0, -128):
        return f"pad value {a['value']} (only 0 and -128 come from a LOAD)"
    pads = a["pads"]
    r = len(ins[0].shape)
    if r != 4 or any(pads[i] or pads[i + 4] for i in (0, 1)):
        return "only spatial padding of rank-4 tensors"
    if max(pads) > _PAD_MAX:
        return f"pads {pads} exceed {_PAD_MAX}"
    return None


def check_resize(
    op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig
) -> str | None:
    si, so = ins[0].shape, outs[0].shape
    if op.attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        return "tf_crop_and_resize (a crop with extrapolation) runs on the host"
    if len(si) != 4 or si[:2] != so[:2]:
        return "only spatial resizing of rank-4 tensors"
    if si[3] > cfg.inp_rows // 2 or so[3] > cfg.acc_rows // 2:
        return "rows too wide"
    return None


def check_transpose(
    op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig
) -> str | None:
    a = op.attrs
    if len(ins[0].shape) == 4 and list(a["perm"]) == [0, 1, 3, 2]:
        return None
    src = channel_permutation(ins[0].shape, list(a["perm"]))
    if src is None:
        return (
            f"transpose {a['perm']} mixes channels with pixels (only H <-> W and "
            "permutations of the channel axes are data movement)"
        )
    blocks, _ = selection([(0, c) for c in src], cfg.block)
    if len(blocks) > cfg.wgt_rows // 2:
        return f"the channel permutation needs {len(blocks)} selection blocks, over half WGT"
    _, c, _, w = as_nchw(ins[0].shape)
    z = -(-c // cfg.block)
    if z * w > cfg.inp_rows // 2 or z * w > cfg.acc_rows // 2:
        return "one row of the channels does not fit the buffers"
    return None


def check_reshape(
    op: Operator, ins: Types, outs: Types, params: Params, cfg: NpuConfig
) -> str | None:
    kind = reshape_kind(ins[0].shape, outs[0].shape)
    if kind == "flatten":
        _, c, h, w = ins[0].shape
        return flatten_fits(Emitter(cfg), c, h, w)
    if kind is None:
        return f"reshape {list(ins[0].shape)} -> {list(outs[0].shape)} reorders channel-tiled bytes"
    return None
