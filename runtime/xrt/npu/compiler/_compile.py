"""The compiler driver: a run of operators -> one `NpuProgram`.

Passes, in order: legalize every operator (`refusal`, by the table of
`xrt.npu.compiler._op_table`), plan each stem convolution's column fold once
(`xrt.npu.compiler._stem_fold`), place the run's values (inputs and outputs each at their
own base register; intermediates by the memory planner (`xrt.npu.compiler._memplan`):
lifetimes, packed so that tensors never live at once share bytes, on chip first when the
target has an OCM, the rest in external scratch; aliases of reshapes sharing their source's
bytes), then lower each operator with its table row (`xrt.npu.compiler._lowering`: pack its
constants into the blob, tile it, emit its steps), and finally insert the dependency tokens
over the whole run, so the STORE of one layer is ordered before the LOADs of the next by the
same mechanism as the tiles inside a layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import NpuConfig
from xrt.hw.targets import NPU
from xrt.network import Network, NetworkView, Operator
from xrt.npu.compiler._emit import CONST_BASE, Emitter
from xrt.npu.compiler._geometry import conv_geom, gemm_geom
from xrt.npu.compiler._layout import tiled_bytes
from xrt.npu.compiler._lowering import OpLowering, Placed, Tiling
from xrt.npu.compiler._memplan import Buffer, pack, split
from xrt.npu.compiler._op_table import is_alias, lower_op, refusal
from xrt.npu.compiler._program import (
    BaseRole,
    LayerReport,
    NpuProgram,
    TensorBinding,
    TensorPlacement,
)
from xrt.npu.compiler._stem_fold import StemFold, folded_copy_name, plan_stem_fold
from xrt.npu.compiler._tiler import ConvGeom, PlanChoice
from xrt.npu.compiler._tokens import insert_tokens
from xrt.ops import is_boundary

__all__ = ["Plans", "compile_run", "tiled_geoms"]

Plans = Mapping[int, Sequence[PlanChoice]]
"""Op id -> the tilings to use for its convolutions (one; two for a column-folded stem)."""


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

    The ``Input`` and ``Output`` ops of a whole network compute nothing: they are left
    out, and the network's inputs and outputs are the program's.

    Raises:
        XrtError: 11003 naming the first operator the NPU cannot run and why.
    """
    b = cfg.block
    ins, outs = list(graph.inputs), list(graph.outputs)
    types = graph.values
    if any(is_boundary(op) for op in graph.ops):
        net = graph.network if isinstance(graph, NetworkView) else graph
        graph = NetworkView(net, [op for op in graph.ops if not is_boundary(op)])
    for op in graph.ops:
        why = refusal(op, types, graph.op_params(op), cfg)
        if why is not None:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{op.describe()}: not for the NPU: {why}")
    if len(ins) + len(outs) + 2 > cfg.base_regs:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{len(ins)} inputs and {len(outs)} outputs need more than {cfg.base_regs} "
            "base registers",
        )
    # Planned once here: the memory planner places each fold's copy, the lowering emits it.
    folds = _stem_folds(graph, cfg)
    bases = [BaseRole(CONST_BASE, "const", "", 0)]
    placed: dict[str, Placed] = {}
    in_bind, out_bind = [], []
    for i, v in enumerate(ins):
        nbytes = tiled_bytes(types[v].shape, b)
        placed[v] = Placed(1 + i, 0, types[v].shape)
        bases.append(BaseRole(1 + i, "input", v, nbytes))
        in_bind.append(TensorBinding(v, types[v].shape, 1 + i, 0, nbytes))
    for i, v in enumerate(outs):
        nbytes = tiled_bytes(types[v].shape, b)
        placed[v] = Placed(1 + len(ins) + i, 0, types[v].shape)
        bases.append(BaseRole(1 + len(ins) + i, "output", v, nbytes))
        out_bind.append(TensorBinding(v, types[v].shape, 1 + len(ins) + i, 0, nbytes))
    first_scratch = len(ins) + len(outs) + 1
    memory = _plan_memory(graph, cfg, ocm_bytes, first_scratch, set(placed), folds, share)
    bases += memory.roles
    em = Emitter(cfg)
    layers: list[LayerReport] = []
    for k, op in enumerate(graph.ops):
        em.tag = k
        src = op.inputs[0]
        dst = op.outputs[0]
        if is_alias(op, types) and dst not in placed:
            p = placed[src]
            placed[dst] = Placed(p.base, p.offset, types[dst].shape)
            layers.append(LayerReport(op.op_id, op.op_type, op.name, "alias (no instructions)"))
            continue
        if dst not in placed:
            placed[dst] = memory.placed[dst]
        start = len(em.steps)
        tiling = Tiling(plans.get(op.op_id) if plans else None, notes)
        fold = folds.get(op.op_id)
        folded = memory.placed.get(folded_copy_name(dst)) if fold is not None else None
        report = lower_op(OpLowering(em, op, graph, placed, cfg, tiling, fold, folded))
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
    fold = plan_stem_fold(op, xt, params, cfg)
    if fold is not None:
        return list(fold.geoms)
    return [conv_geom(op, xt, params, cfg)]


def _stem_folds(graph: Network | NetworkView, cfg: NpuConfig) -> dict[int, StemFold]:
    """Op id -> the stem fold of every convolution of the run that folds."""
    folds = {}
    for op in graph.ops:
        fold = plan_stem_fold(op, graph.values[op.inputs[0]], graph.op_params(op), cfg)
        if fold is not None:
            folds[op.op_id] = fold
    return folds


@dataclass
class _Memory:
    """The memory plan of a run: scratch base roles, where each intermediate is, published."""

    roles: list[BaseRole]
    placed: dict[str, Placed]
    published: list[TensorPlacement]


def _plan_memory(
    graph: Network | NetworkView,
    cfg: NpuConfig,
    ocm_bytes: int,
    first_base: int,
    io: set[str],
    folds: Mapping[int, StemFold],
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
        if (fold := folds.get(op.op_id)) is not None:
            f = folded_copy_name(dst)
            shapes[f], start[f], end[f], reads[f] = fold.folded_shape, k, k, 1
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
    placed: dict[str, Placed] = {}
    published: list[TensorPlacement] = []
    base = first_base
    for kind, memory, group in (("scratch", "ddr", external), ("ocm", "ocm", on_chip)):
        if not group:
            continue
        packing = pack(group)
        roles.append(BaseRole(base, kind, "", packing.size))
        for buf in group:
            off = packing.offsets[buf.name]
            placed[buf.name] = Placed(base, off, shapes[buf.name])
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
