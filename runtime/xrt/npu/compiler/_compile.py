"""The compiler driver: a run of operators -> one `NpuProgram`.

Passes, in order: legalize every operator (`refusal`), place the run's values (inputs and
outputs each at their own base register; intermediates by the memory planner
(`xrt.npu.compiler._memplan`): lifetimes, packed so that tensors never live at once share
bytes, on chip first when the target has an OCM, the rest in external scratch; aliases of
reshapes sharing their source's bytes), then per operator pack its constants into the blob,
tile it and emit its steps, and finally insert the dependency tokens over the whole run, so
the STORE of one layer is ordered before the LOADs of the next by the same mechanism as the
tiles inside a layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.hw import isa
from xrt.hw.config import NpuConfig
from xrt.hw.targets import NPU
from xrt.network import Network, NetworkView, Operator
from xrt.npu.compiler import _vector as vx
from xrt.npu.compiler._conv import ConvConsts, emit_conv
from xrt.npu.compiler._emit import CONST_BASE, Emitter
from xrt.npu.compiler._geometry import conv_geom, gemm_geom, pool_window
from xrt.npu.compiler._layout import View, as_nchw, tiled_bytes, view_of
from xrt.npu.compiler._legalize import is_alias, refusal, reshape_kind
from xrt.npu.compiler._memplan import Buffer, pack, split
from xrt.npu.compiler._movement import (
    channel_permutation,
    concat_blocks,
    emit_flatten,
    emit_select,
    flatten_blocks,
    selection,
)
from xrt.npu.compiler._pack import bias_rows, conv_blocks, lut_rows, prm_rows
from xrt.npu.compiler._program import (
    BaseRole,
    LayerReport,
    NpuProgram,
    TensorBinding,
    TensorPlacement,
)
from xrt.npu.compiler._tiler import ConvGeom, ConvPlan, PlanChoice, plan_conv
from xrt.npu.compiler._tokens import insert_tokens
from xrt.ops.pool import pool_counts
from xrt.ops.resize import nearest_indices

__all__ = ["Plans", "compile_run", "tiled_geoms"]

Plans = Mapping[int, Sequence[PlanChoice]]
"""Op id -> the tilings to use for its convolutions (one; two for a column-folded stem)."""


@dataclass
class _Placed:
    base: int
    offset: int
    shape: tuple[int, ...]

    def views(self, block: int, shape: tuple[int, ...] | None = None) -> list[View]:
        shape = shape or self.shape
        if len(shape) == 2:
            return [view_of(shape, self.base, self.offset, 0, block)]
        return [view_of(shape, self.base, self.offset, n, block) for n in range(shape[0])]


def compile_run(
    graph: Network | NetworkView,
    cfg: NpuConfig = NPU,
    verbose: bool = False,
    ocm_bytes: int = 0,
    share: bool = True,
    plans: Plans | None = None,
    notes: list[str] | None = None,
) -> NpuProgram:
    """Compile every operator of `graph` (a view of consecutive NPU operators) into one program.

    Args:
        graph: The run; its inputs and outputs become the program's.
        cfg: Buffer sizes and block (default: the hardware's).
        verbose: Print each layer's tiling as it is chosen.
        ocm_bytes: On-chip memory the program may keep intermediates in (ZG330's OCM; 0:
            every intermediate in external memory, as on Buyi).
        share: Let intermediates that are never live together share bytes. Without it
            every intermediate keeps its own bytes, so all of them can be read back after
            the run (per-layer dumps of a merged program).
        plans: Tilings to use instead of the tiler's estimate (tuning records, `xrt.tuning`),
            by op id. Each is validated (`plan_conv`); one that is not legal for its layer
            is ignored: the layer gets the default tiling and a line in `notes`.
        notes: Where to append those lines (default: nowhere).

    Raises:
        XrtError: 11003 naming the first operator the NPU cannot run and why.
    """
    b = cfg.block
    types = graph.values
    for op in graph.ops:
        why = refusal(op, types, graph.op_params(op), cfg)
        if why is not None:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{op.describe()}: not for the NPU: {why}")
    ins, outs = list(graph.inputs), list(graph.outputs)
    if len(ins) + len(outs) + 2 > cfg.base_regs:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{len(ins)} inputs and {len(outs)} outputs need more than {cfg.base_regs} "
            "base registers",
        )
    bases = [BaseRole(CONST_BASE, "const", "", 0)]
    placed: dict[str, _Placed] = {}
    in_bind, out_bind = [], []
    for i, v in enumerate(ins):
        nbytes = tiled_bytes(types[v].shape, b)
        placed[v] = _Placed(1 + i, 0, types[v].shape)
        bases.append(BaseRole(1 + i, "input", v, nbytes))
        in_bind.append(TensorBinding(v, types[v].shape, 1 + i, 0, nbytes))
    for i, v in enumerate(outs):
        nbytes = tiled_bytes(types[v].shape, b)
        placed[v] = _Placed(1 + len(ins) + i, 0, types[v].shape)
        bases.append(BaseRole(1 + len(ins) + i, "output", v, nbytes))
        out_bind.append(TensorBinding(v, types[v].shape, 1 + len(ins) + i, 0, nbytes))
    memory = _plan_memory(graph, cfg, ocm_bytes, len(ins) + len(outs) + 1, set(placed), share)
    bases += memory.roles
    em = Emitter(cfg)
    layers: list[LayerReport] = []
    for k, op in enumerate(graph.ops):
        em.tag = k
        src = op.inputs[0]
        dst = op.outputs[0]
        if is_alias(op, types) and dst not in placed:
            p = placed[src]
            placed[dst] = _Placed(p.base, p.offset, types[dst].shape)
            layers.append(LayerReport(op.op_id, op.op_type, op.name, "alias (no instructions)"))
            continue
        if dst not in placed:
            placed[dst] = memory.placed[dst]
        start = len(em.steps)
        tiling = _Tiling(plans.get(op.op_id) if plans else None, notes)
        report = _lower(em, op, graph, placed, cfg, memory.placed.get(_fold_name(dst)), tiling)
        report.first_insn, report.last_insn = start, len(em.steps)
        if tiling.used:
            report.detail += " [recorded tiling]"
        layers.append(report)
        if verbose:
            print(report)
    grains = {buf: em.half(buf) for buf in ("INP", "WGT", "ACC", "PRM")}
    program, index = insert_tokens(em.steps, with_index=True, grains=grains)
    for layer in layers:
        if layer.last_insn > layer.first_insn:
            layer.first_insn, layer.last_insn = (
                index[layer.first_insn],
                index[layer.last_insn - 1] + 1,
            )
        else:
            layer.first_insn = layer.last_insn = 0
    assert em.blob is not None
    consts = em.blob.tobytes()
    bases[0] = BaseRole(CONST_BASE, "const", "", len(consts))
    return NpuProgram(
        program, consts, bases, in_bind, out_bind, sum(r.size for r in memory.roles), layers, b,
        [op.op_id for op in graph.ops], intermediates=memory.published,
    )  # fmt: skip


@dataclass
class _Tiling:
    """The tilings one operator was asked to use (None: the tiler's), and where to note a
    refused one."""

    chosen: Sequence[PlanChoice] | None
    notes: list[str] | None
    used: bool = False  # the chosen tilings were legal and used

    def plans(self, op: Operator, geoms: Sequence[ConvGeom], cfg: NpuConfig) -> list[ConvPlan]:
        """One plan per geometry: the chosen ones when all are legal, else the defaults."""
        defaults = [plan_conv(g, cfg) for g in geoms]
        assert all(not isinstance(p, str) for p in defaults)
        if self.chosen is None:
            return defaults  # type: ignore[return-value]
        why = f"{len(self.chosen)} tilings for {len(geoms)} convolutions"
        if len(self.chosen) == len(geoms):
            picked = [plan_conv(g, cfg, c) for g, c in zip(geoms, self.chosen, strict=True)]
            bad = [p for p in picked if isinstance(p, str)]
            if not bad:
                self.used = True
                return picked  # type: ignore[return-value]
            why = str(bad[0])
        if self.notes is not None:
            self.notes.append(f"{op.describe()}: recorded tiling ignored: {why}")
        return defaults  # type: ignore[return-value]


def tiled_geoms(op: Operator, graph: Network | NetworkView, cfg: NpuConfig = NPU) -> list[ConvGeom]:
    """The geometries the tiler plans for `op`, in emission order: one for a convolution
    or dense layer, two for a column-folded stem (the fold, then the kh x 1 convolution),
    none for other operators. A tuning record holds one tiling per geometry."""
    params = graph.op_params(op)
    if op.op_type == "QGemm":
        return [gemm_geom(graph.values[op.inputs[0]], params, cfg)]
    if op.op_type != "QConv2d":
        return []
    xt = graph.values[op.inputs[0]]
    fold = _fold_plan(op, xt, params, cfg)
    if fold is not None:
        return [fold.g1, fold.g2]
    return [conv_geom(op, xt, params, cfg)]


def _fold_name(value: str) -> str:
    """The name of the column-folded copy a stem convolution producing `value` reads."""
    return value + "#fold"


@dataclass
class _Memory:
    """The memory plan of a run: scratch base roles, where each intermediate is, published."""

    roles: list[BaseRole]
    placed: dict[str, _Placed]
    published: list[TensorPlacement]


def _plan_memory(
    graph: Network | NetworkView,
    cfg: NpuConfig,
    ocm_bytes: int,
    first_base: int,
    io: set[str],
    share: bool = True,
) -> _Memory:
    """Lifetimes of the run's intermediates -> packed offsets in on-chip and external scratch.

    Reshape-like operators alias their source (no copy): a buffer lives until the last read
    of any alias. A stem convolution's column-folded copy lives during its operator only.
    Without `share` every buffer is packed as if live for the whole run.
    """
    b = cfg.block
    types = graph.values
    ops = list(graph.ops)
    root: dict[str, str] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    reads: dict[str, int] = {}
    for k, op in enumerate(ops):
        for v in op.inputs:
            r = root.get(v, v)
            if r in start:
                end[r] = max(end[r], k)
                reads[r] += 1
        dst = op.outputs[0]
        mid = _fold_shape(op, types[op.inputs[0]], graph.op_params(op), cfg)
        if mid is not None:
            f = _fold_name(dst)
            shapes[f], start[f], end[f], reads[f] = mid, k, k, 1
        if dst in io:
            continue
        if is_alias(op, types):
            src = op.inputs[0]
            root[dst] = root.get(src, src)
            continue
        shapes[dst], start[dst], end[dst], reads[dst] = types[dst].shape, k, k, 0
    buffers = [
        Buffer(v, tiled_bytes(shapes[v], b), start[v], end[v],
               tiled_bytes(shapes[v], b) * (1 + reads[v]))
        for v in start
    ]  # fmt: skip
    real = {buf.name: buf for buf in buffers}
    if not share:
        buffers = [dataclasses.replace(buf, start=0, end=len(ops) - 1) for buf in buffers]
    on_chip, external = split(buffers, ocm_bytes)
    if on_chip and external and first_base + 2 > cfg.base_regs:
        on_chip, external = [], buffers  # one scratch base register left
    roles: list[BaseRole] = []
    placed: dict[str, _Placed] = {}
    published: list[TensorPlacement] = []
    base = first_base
    for kind, memory, group in (("scratch", "ddr", external), ("ocm", "ocm", on_chip)):
        if not group:
            continue
        packing = pack(group)
        roles.append(BaseRole(base, kind, "", packing.size))
        for buf in group:
            off = packing.offsets[buf.name]
            placed[buf.name] = _Placed(base, off, shapes[buf.name])
            kept = not any(
                o.start > buf.end
                and packing.offsets[o.name] < off + buf.size
                and off < packing.offsets[o.name] + o.size
                for o in group
            )
            life = real[buf.name]
            published.append(
                TensorPlacement(buf.name, memory, base, off, buf.size, shapes[buf.name],
                                ops[life.start].op_id, ops[life.end].op_id, readable_after=kept)
            )  # fmt: skip
        base += 1
    by_name = {p.name: p for p in published}
    for alias, r in root.items():
        if r in by_name:
            p = by_name[r]
            published.append(
                dataclasses.replace(p, name=alias, shape=types[alias].shape, alias_of=r)
            )
    published.sort(key=lambda p: (p.first_op, p.name))
    return _Memory(roles, placed, published)


def _lower(
    em: Emitter,
    op: Operator,
    graph: Network | NetworkView,
    placed: dict[str, _Placed],
    cfg: NpuConfig,
    fold_mid: _Placed | None,
    tiling: _Tiling,
) -> LayerReport:
    b = cfg.block
    t = op.op_type
    a = op.attrs
    types = graph.values
    params = graph.op_params(op)
    x = placed[op.inputs[0]]
    y = placed[op.outputs[0]]
    rep = LayerReport(op.op_id, t, op.name, "")
    if t == "QConv2d" and _fold_columns(
        em, op, types[op.inputs[0]], params, x, y, cfg, fold_mid, rep, tiling
    ):
        return rep
    if t in ("QConv2d", "QGemm"):
        if t == "QConv2d":
            g = conv_geom(op, types[op.inputs[0]], params, cfg)
            weight, groups = params["weight"], a["groups"]
            xs, ys = x.views(b), y.views(b)
        else:
            g = gemm_geom(types[op.inputs[0]], params, cfg)
            weight, groups = params["weight"][:, :, None, None], 1
            xs, ys = x.views(b, types[op.inputs[0]].shape), y.views(b, types[op.outputs[0]].shape)
        (plan,) = tiling.plans(op, [g], cfg)
        pk = conv_blocks(weight, groups, b)
        consts = ConvConsts(
            pk,
            em.const(pk.blocks),
            em.const(bias_rows(params["bias"], b)),
            em.const(prm_rows(params["multiplier"], params["shift"], b)),
        )
        rep.gemm_cycles = emit_conv(em, xs, ys, g, plan, consts, a["lo"], a["hi"])
        rep.detail = str(plan)
        rep.macs = g.o * g.ho * g.wo * g.kh * g.kw * g.c_per_group * len(xs)
        return rep
    if t in ("QAdd", "QMul"):
        sa, sb = types[op.inputs[0]].shape, types[op.inputs[1]].shape
        pa, pb = placed[op.inputs[0]], placed[op.inputs[1]]
        ma, mb = (a["mult_a"], a["mult_b"]) if t == "QAdd" else (0, 0)
        if sa != types[op.outputs[0]].shape:  # the broadcast operand goes second
            pa, pb, sa, sb, ma, mb = pb, pa, sb, sa, mb, ma
        bcast = sa != sb
        av, yv_ = pa.views(b), y.views(b)
        bv = pb.views(b)
        func = isa.VecFunc.QADD if t == "QAdd" else isa.VecFunc.MUL
        q = vx.StoreQ(1 if t == "QAdd" else a["multiplier"], a["shift"], a["lo"], a["hi"])
        for n, (av_n, yv_n) in enumerate(zip(av, yv_, strict=True)):
            bv_n = bv[n if len(bv) > 1 else 0]
            vx.emit_pointwise(em, func, av_n, yv_n, q, bv_n, bcast, ma, mb)
        rep.detail = f"{'broadcast ' if bcast else ''}{t} via VEC {func.name}"
        return rep
    if (
        t in ("Reshape", "Flatten", "Identity")
        and reshape_kind(types[op.inputs[0]].shape, types[op.outputs[0]].shape) == "flatten"
    ):
        wgt = em.const(flatten_blocks(b))
        yv = y.views(b)[0]
        for n, xv in enumerate(x.views(b, types[op.inputs[0]].shape)):
            rep.gemm_cycles += emit_flatten(em, xv, yv, n, wgt)
        rep.detail = "features moved across lanes by single-entry selection GEMMs"
        return rep
    if t in ("QClip", "Relu", "Identity", "Reshape", "Flatten", "QLut"):
        q = (
            vx.StoreQ(lo=a["lo"], hi=a["hi"])
            if t == "QClip"
            else vx.StoreQ(lo=0)
            if t == "Relu"
            else vx.StoreQ()
        )
        table = 0
        func = isa.VecFunc.MOV
        if t == "QLut":
            table = em.slot_lut()
            em.load_run(
                isa.Buffer.LUT, table * (256 // b), em.const(lut_rows(params["table"], b)), 256 // b
            )
            func = isa.VecFunc.LUT
        shape = types[op.inputs[0]].shape
        for xv, yv in zip(x.views(b, shape), y.views(b, shape), strict=True):
            vx.emit_pointwise(em, func, xv, yv, q, table=table)
        rep.detail = f"VEC {func.name} + STORE clamp [{q.lo}, {q.hi}]"
        return rep
    if t in ("MaxPool2d", "QAvgPool2d"):
        win = pool_window(a)
        _, _, h, w = types[op.inputs[0]].shape
        if t == "MaxPool2d":
            stores: Any = vx.StoreQ()
        else:
            stores = _avg_rects(a, h, w)
        for xv, yv in zip(x.views(b), y.views(b), strict=True):
            vx.emit_pool(em, xv, yv, win, "max" if t == "MaxPool2d" else "sum", stores)
        rep.detail = f"window {win[:2]} stride {win[2:4]}: VEC per plane and tap" + (
            f", {len(stores)} divisor regions" if isinstance(stores, list) else ""
        )
        return rep
    if t == "QGlobalAvgPool":
        q = vx.StoreQ(a["multiplier"], a["shift"], a["lo"], a["hi"])
        oshape = types[op.outputs[0]].shape
        for xv, yv in zip(x.views(b), y.views(b, oshape), strict=True):
            vx.emit_gap(em, xv, yv, q)
        rep.detail = "VEC ADD chains per plane"
        return rep
    if t in ("Concat", "QConcat"):
        shapes = [types[v].shape for v in op.inputs]
        chans = [as_nchw(s)[1] for s in shapes]
        blocks, plan = concat_blocks(chans, b)
        wgt = em.const(blocks)
        prm = None
        q = vx.StoreQ()
        if t == "QConcat":
            ms, ss = a["multipliers"], a["shifts"]
            q = vx.StoreQ(lo=a["lo"], hi=a["hi"])
            if len(set(zip(ms, ss, strict=True))) == 1:
                q = vx.StoreQ(ms[0], ss[0], a["lo"], a["hi"])
            else:
                m_lane = np.concatenate([np.full(c, m) for c, m in zip(chans, ms, strict=True)])
                s_lane = np.concatenate([np.full(c, s) for c, s in zip(chans, ss, strict=True)])
                prm = em.const(prm_rows(m_lane, s_lane, b))
        per_input = [placed[v].views(b, s) for v, s in zip(op.inputs, shapes, strict=True)]
        for n, yv in enumerate(y.views(b)):
            emit_select(
                em, [v[n] for v in per_input], yv, wgt, len(blocks), plan, q.m, q.s, q.lo, q.hi,
                prm,
            )  # fmt: skip
        rep.detail = f"selection GEMMs, {len(blocks)} blocks"
        return rep
    if t == "Pad":
        p = a["pads"]
        pads = (p[2], p[3], p[6], p[7])
        for xv, yv in zip(x.views(b), y.views(b), strict=True):
            vx.emit_pad(em, xv, yv, pads, int(a["value"]) == -128)
        rep.detail = f"padded LOADs {pads}"
        return rep
    if t == "Resize":
        _, _, h, w = types[op.inputs[0]].shape
        _, _, ho, wo = types[op.outputs[0]].shape
        cm, nm = a["coordinate_transformation_mode"], a["nearest_mode"]
        iy = (
            nearest_indices(h, ho, a["scales"][2], cm, nm)
            if (ho, a["scales"][2]) != (h, 1.0)
            else np.arange(h)
        )
        ix = (
            nearest_indices(w, wo, a["scales"][3], cm, nm)
            if (wo, a["scales"][3]) != (w, 1.0)
            else np.arange(w)
        )
        for xv, yv in zip(x.views(b), y.views(b), strict=True):
            vx.emit_resize(em, xv, yv, iy, ix)
        rep.detail = "nearest: VEC MOV spreads columns, STOREs repeat rows"
        return rep
    if t == "Transpose" and list(a["perm"]) != [0, 1, 3, 2]:
        src = channel_permutation(types[op.inputs[0]].shape, list(a["perm"]))
        assert src is not None
        blocks, plan = selection([(0, c) for c in src], b)
        wgt = em.const(blocks)
        shape = types[op.inputs[0]].shape
        for xv, yv in zip(x.views(b, shape), y.views(b, types[op.outputs[0]].shape), strict=True):
            emit_select(em, [xv], yv, wgt, len(blocks), plan, 1, 0, -128, 127, None)
        rep.detail = f"channel permutation: selection GEMMs, {len(blocks)} blocks"
        return rep
    if t == "Transpose":
        shape = types[op.inputs[0]].shape
        for xv, yv in zip(x.views(b, shape), y.views(b), strict=True):
            tv = View(xv.base, xv.offset, xv.planes, xv.cols, xv.rows, xv.channels,
                      xv.z_stride, xv.x_stride, xv.y_stride, xv.pixel)  # fmt: skip
            vx.emit_pointwise(em, isa.VecFunc.MOV, tv, yv, vx.StoreQ())
        rep.detail = "H <-> W through LOAD strides"
        return rep
    raise AssertionError(t)


@dataclass
class _Fold:
    """The two convolutions of a column-folded stem (see `_fold_columns`)."""

    w1: np.ndarray
    w2: np.ndarray
    g1: ConvGeom
    g2: ConvGeom
    p1: Any
    p2: Any
    mid_shape: tuple[int, int, int, int]


def _fold_plan(
    op: Operator, xt: TensorType, params: Mapping[str, np.ndarray], cfg: NpuConfig
) -> _Fold | None:
    """The folded form of a convolution over few channels, or None when it does not qualify."""
    if op.op_type != "QConv2d":
        return None
    a = op.attrs
    w = params["weight"]
    o, c, kh, kw = w.shape
    b = cfg.block
    n, _, h, wd = xt.shape
    if a["groups"] != 1 or kw < 2 or 2 * c > b:
        return None
    sh, sw = a["strides"]
    dh, dw = a["dilations"]
    pt, pl = a["pads"][:2]
    g = conv_geom(op, xt, params, cfg)
    cf = c * kw
    w1 = np.zeros((cf, c, 1, kw), np.int8)
    for j in range(kw):
        w1[j * c + np.arange(c), np.arange(c), 0, j] = 1
    w2 = w.transpose(0, 3, 1, 2).reshape(o, cf, kh, 1)  # [o, j*C + c, i, 0] = W[o, c, i, j]
    pk1, pk2 = conv_blocks(w1, 1, b), conv_blocks(w2, 1, b)
    g1 = ConvGeom(c, h, wd, cf, h, g.wo, 1, kw, 1, sw, 1, dw, 0, pl, pk1.ib_n, c)
    g2 = ConvGeom(cf, h, g.wo, o, g.ho, g.wo, kh, 1, sh, 1, dh, 1, pt, 0, pk2.ib_n, cf)
    p1, p2 = plan_conv(g1, cfg), plan_conv(g2, cfg)
    if isinstance(p1, str) or isinstance(p2, str):
        return None
    return _Fold(w1, w2, g1, g2, p1, p2, (n, cf, h, g.wo))


def _fold_shape(
    op: Operator, xt: TensorType, params: Mapping[str, np.ndarray], cfg: NpuConfig
) -> tuple[int, ...] | None:
    """Shape of the column-folded copy `op` needs in scratch, or None (no fold)."""
    if op.op_type != "QConv2d":
        return None
    fold = _fold_plan(op, xt, params, cfg)
    return None if fold is None else fold.mid_shape


def _fold_columns(
    em: Emitter,
    op: Operator,
    xt: TensorType,
    params: Mapping[str, np.ndarray],
    x: _Placed,
    y: _Placed,
    cfg: NpuConfig,
    mid: _Placed | None,
    rep: LayerReport,
    tiling: _Tiling,
) -> bool:
    """A convolution over few channels (a network's stem) with its kw taps folded into lanes.

    With C <= B/2 channels most of the array's B input lanes would carry zeros. Instead a
    first convolution with 0/1 weights (kernel 1 x kw, the op's column stride, padding and
    dilation) copies the columns each output column reads into ``C*kw`` channels,
    ``X'[j*C + c](y, x) = X[c](y, x*sw - pl + j*dw)``, exactly (M = 1, S = 0), into `mid`
    (placed by the memory planner); the op then runs as a kh x 1 convolution over X' with
    the same sums, bias and requantization. Returns False (nothing emitted) when the op
    does not qualify or a step does not tile.
    """
    fold = _fold_plan(op, xt, params, cfg)
    if fold is None:
        return False
    assert mid is not None, "the memory planner placed no folded copy"
    p1, p2 = tiling.plans(op, [fold.g1, fold.g2], cfg)
    a = op.attrs
    b = cfg.block
    _, c, kh, kw = params["weight"].shape
    cf = c * kw
    pk1, pk2 = conv_blocks(fold.w1, 1, b), conv_blocks(fold.w2, 1, b)
    one = np.ones(cf, np.int32)
    k1 = ConvConsts(
        pk1,
        em.const(pk1.blocks),
        em.const(bias_rows(np.zeros(cf, np.int32), b)),
        em.const(prm_rows(one, 0 * one, b)),
    )
    k2 = ConvConsts(
        pk2,
        em.const(pk2.blocks),
        em.const(bias_rows(params["bias"], b)),
        em.const(prm_rows(params["multiplier"], params["shift"], b)),
    )
    rep.gemm_cycles = emit_conv(em, x.views(b), mid.views(b), fold.g1, p1, k1, -128, 127)
    rep.gemm_cycles += emit_conv(em, mid.views(b), y.views(b), fold.g2, p2, k2, a["lo"], a["hi"])
    rep.detail = f"columns folded into {cf} channels; fold: {p1}; conv: {p2}"
    g = conv_geom(op, xt, params, cfg)
    rep.macs = g.o * g.ho * g.wo * kh * kw * c * xt.shape[0]
    return True


def _avg_rects(a: Mapping[str, Any], h: int, w: int) -> list[tuple[int, int, int, int, vx.StoreQ]]:
    """Rectangles of equal divisor of an average pool, each with its (M_k, S_k)."""
    counts = pool_counts(a, h, w)
    table = {int(k): (m, s) for k, m, s in a["requant"]}

    def runs(vals: np.ndarray) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        start = 0
        for i in range(1, len(vals) + 1):
            if i == len(vals) or vals[i] != vals[start]:
                out.append((start, i))
                start = i
        return out

    # The divisor is separable (rows x columns): equal runs of each give the rectangles.
    row_runs = runs(_row_keys(counts))
    col_runs = runs(_row_keys(counts.T))
    rects = []
    for ya, yb in row_runs:
        for xa, xb in col_runs:
            m, s = table[int(counts[ya, xa])]
            rects.append((ya, yb, xa, xb, vx.StoreQ(m, s, a["lo"], a["hi"])))
    return rects


def _row_keys(counts: np.ndarray) -> np.ndarray:
    """One integer per row identifying its contents (rows equal <=> keys equal)."""
    _, keys = np.unique(counts, axis=0, return_inverse=True)
    return keys.reshape(-1)
