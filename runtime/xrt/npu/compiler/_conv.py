"""Lowering of QConv2d (and QGemm, a 1 x N convolution) to LOAD / GEMM / STORE.

For each tile of a `ConvPlan`: the bias rows of the output block chunk go into the
accumulator half of the tile, the input rows the tile needs (with left/right padding
columns; rows in the top/bottom padding are never loaded, their taps are skipped since
they contribute 0) into an INP half, the weight blocks into a WGT half unless resident.
One GEMM covers all output columns x the rows a tap row is valid for x the kw taps of that
row (for 1x1 kernels: x all input blocks), so the inner loop is one output row long and a
3x3 layer of 64 channels issues 12 GEMMs of ``9 * Wo * rows`` cycles per output block. The
first GEMM of an output block starts from the bias (``init = BIAS``) when it covers the
whole tile; otherwise a VEC MOV copies the bias first. One STORE per tile requantizes every
output block of the chunk with its PRM rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from xrt.hw import isa
from xrt.npu.compiler._emit import MAX_COUNT, Emitter
from xrt.npu.compiler._layout import View
from xrt.npu.compiler._pack import PackedConv
from xrt.npu.compiler._tiler import ConvGeom, ConvPlan
from xrt.npu.compiler._tokens import Step

__all__ = ["ConvConsts", "emit_conv"]


@dataclass(frozen=True)
class ConvConsts:
    """Offsets in the constant blob of a packed convolution."""

    packed: PackedConv
    wgt: int
    bias: int
    prm: int


def _blk(pk: PackedConv, ob: int, ib: int, tap: int, taps: int) -> int:
    """Index of block (ob, ib, tap) in the packed blocks."""
    return pk.first[ob] + (ib - pk.ib_lo[ob]) * taps + tap


def _valid_rows(g: ConvGeom, i: int, y0: int, y1: int) -> tuple[int, int]:
    """Output rows ``[a, b)`` within ``[y0, y1)`` whose tap row `i` reads a real input row."""
    off = i * g.dh - g.pt
    a = max(y0, -(off // g.sh)) if off < 0 else y0  # ceil(-off / sh)
    b = min(y1, (g.h - 1 - off) // g.sh + 1) if g.h - 1 - off >= 0 else y0
    return a, max(a, b)


def emit_conv(
    em: Emitter,
    xs: list[View],
    ys: list[View],
    g: ConvGeom,
    plan: ConvPlan,
    k: ConvConsts,
    lo: int,
    hi: int,
) -> int:
    """Emit a convolution over each image pair of `xs` / `ys`; returns the GEMM cycles."""
    b = em.B
    pk = k.packed
    zo = len(pk.first)
    zi = -(-g.c // b)
    taps = g.kh * g.kw
    pw = g.padded_w
    acc_bytes = em.cfg.row_bytes("ACC")
    prm_bytes = em.cfg.row_bytes("PRM")
    chunks = [list(range(c, min(zo, c + plan.n_ob))) for c in range(0, zo, plan.n_ob)]
    tiles = [(y0, min(g.ho, y0 + plan.th)) for y0 in range(0, g.ho, plan.th)]
    passes = [(p, min(zi, p + plan.n_ib)) for p in range(0, zi, plan.n_ib)]
    cycles = 0
    nonzero = pk.blocks.reshape(len(pk.blocks), -1).any(axis=1)

    # PRM rows of the whole layer, once, when they fit half the buffer; else each output
    # block chunk's with its tile (chunks never exceed half: `plan_conv`).
    prm_once = zo <= em.half("PRM")
    prm_base, prm_first, prm_key = 0, 0, None
    if prm_once:
        prm_base = em.slot("PRM")
        em.load_run(isa.Buffer.PRM, prm_base, k.prm, zo)
    wgt_rows: dict[tuple[int, int], int] = {}  # (ob, ib) -> WGT row of its tap (0, 0)
    # Resident weights: output blocks [0, 1), [1, 2), [2, 4), [4, 8), ... one LOAD each, the
    # first before the first input tile (it may overlap the previous layer's tail), the
    # others after it: the first GEMMs wait for one block's weights and that tile, and each
    # later LOAD is no longer than the GEMMs of the blocks before it (it arrives in time).
    groups = [(o, min(zo, max(1, 2 * o))) for o in [0, *(1 << i for i in range(zo.bit_length()))]]
    wgt_pending = [(o0, o1) for o0, o1 in groups if o0 < zo] if plan.wgt_resident else []
    if wgt_pending:
        _load_weights(em, k, taps, *wgt_pending.pop(0))
    if plan.wgt_resident:
        for ob in range(zo):
            for ib in range(pk.ib_lo[ob], pk.ib_lo[ob] + pk.ib_n[ob]):
                wgt_rows[ob, ib] = pk.first[ob] + (ib - pk.ib_lo[ob]) * taps
    wgt_key: object = None
    inp_key: object = None
    inp_base = 0
    inp_geom = (0, 0)  # first loaded row, rows loaded

    order = (
        [(t, c) for t in range(len(tiles)) for c in range(len(chunks))]
        if plan.order == "rows"
        else [(t, c) for c in range(len(chunks)) for t in range(len(tiles))]
    )
    bounds: list[int] = []  # where each tile's steps start
    for image, (xv, yv) in enumerate(zip(xs, ys, strict=True)):
        for t, c in order:
            bounds.append(len(em.steps))
            last = (t, c) == order[-1]
            y0, y1 = tiles[t]
            obs = chunks[c]
            n = len(obs)
            acc_base = em.slot("ACC")
            out_base = acc_base + n
            em.load_run(isa.Buffer.ACC, acc_base, k.bias + obs[0] * acc_bytes, n)
            if not prm_once and prm_key != c:
                prm_key, prm_first = c, obs[0]
                prm_base = em.slot("PRM")
                em.load_run(isa.Buffer.PRM, prm_base, k.prm + obs[0] * prm_bytes, n)
            tiles_acc: dict[int, _AccTile] = {}
            for p0, p1 in passes:
                rows = [
                    y * g.sh - g.pt + i * g.dh
                    for i in range(g.kh)
                    for y in range(y0, y1)
                    if 0 <= y * g.sh - g.pt + i * g.dh < g.h
                ]
                if not rows:
                    continue
                rl, rh = min(rows), max(rows)
                # A resident input holds every plane (loaded once); else this pass's.
                z_lo, z_hi = (0, zi) if plan.inp_resident else (p0, p1)
                key = (image, rl, rh, z_lo, z_hi)
                if key != inp_key:
                    inp_key = key
                    inp_base = 0 if plan.inp_resident else em.slot("INP")
                    nr_ = rh - rl + 1
                    for za in range(z_lo, z_hi, MAX_COUNT):
                        zb = min(z_hi, za + MAX_COUNT)
                        em.load_view(
                            inp_base + (za - z_lo) * nr_ * pw, xv, za, zb - za, rl, nr_,
                            (0, 0, g.pl, g.pad_right),
                        )  # fmt: skip
                    inp_geom = (rl, nr_)
                zb0 = z_lo
                for o0, o1 in wgt_pending:
                    _load_weights(em, k, taps, o0, o1)
                wgt_pending = []
                rl, nr = inp_geom
                if not plan.wgt_resident and (c, p0) != wgt_key:
                    wgt_key = (c, p0)
                    wbase = em.slot("WGT")
                    row = wbase
                    for ob in obs:
                        ib_a = max(p0, pk.ib_lo[ob])
                        ib_b = min(p1, pk.ib_lo[ob] + pk.ib_n[ob])
                        if ib_b <= ib_a:
                            continue
                        first = pk.first[ob] + (ib_a - pk.ib_lo[ob]) * taps
                        em.load_run(
                            isa.Buffer.WGT, row, k.wgt + first * b * b, (ib_b - ib_a) * taps
                        )
                        for ib in range(ib_a, ib_b):
                            wgt_rows[ob, ib] = row + (ib - ib_a) * taps
                        row += (ib_b - ib_a) * taps
                for ol, ob in enumerate(obs):
                    ib_a = max(p0, pk.ib_lo[ob])
                    ib_b = min(p1, pk.ib_lo[ob] + pk.ib_n[ob])
                    if ib_b <= ib_a:
                        continue
                    obase = out_base + ol * plan.th * g.wo

                    acc = tiles_acc.setdefault(
                        ol, _AccTile(em, g, pw, y0, y1, obase, acc_base + ol)
                    )
                    if taps == 1:
                        ya, yb = _valid_rows(g, 0, y0, y1)
                        # All-zero blocks at the ends of the input block loop are skipped.
                        live = [ib for ib in range(ib_a, ib_b) if nonzero[_blk(pk, ob, ib, 0, 1)]]
                        if yb > ya and live:
                            ia, iz = live[0], live[-1] + 1
                            inp = inp_base + (ia - zb0) * nr * pw + (ya * g.sh - g.pt - rl) * pw
                            cycles += acc.gemm(ya, yb, inp, wgt_rows[ob, ia], (iz - ia, nr * pw, 1))
                        continue
                    spans = sorted(
                        ((i, *_valid_rows(g, i, y0, y1)) for i in range(g.kh)),
                        key=lambda s: s[1] - s[2],
                    )
                    for ib in range(ib_a, ib_b):
                        for i, ya, yb in spans:
                            # Taps of all-zero blocks at the row's ends are skipped.
                            first = _blk(pk, ob, ib, i * g.kw, taps)
                            live = [j for j in range(g.kw) if nonzero[first + j]]
                            if yb <= ya or not live:
                                continue
                            ja, jz = live[0], live[-1] + 1
                            inp = (
                                inp_base
                                + (ib - zb0) * nr * pw
                                + (ya * g.sh - g.pt + i * g.dh - rl) * pw
                                + ja * g.dw
                            )
                            wgt = wgt_rows[ob, ib] + i * g.kw + ja
                            cycles += acc.gemm(ya, yb, inp, wgt, (jz - ja, g.dw, 1))
            for ol in range(n):
                if ol not in tiles_acc or not tiles_acc[ol].started:
                    _bias_init(em, out_base + ol * plan.th * g.wo, acc_base + ol, y1 - y0, g.wo)
            # One STORE per tile; the image's last tile stores each output block on its own,
            # right after its last GEMM, so that one block's STORE is left after the GEMMs.
            for z0, nz in [(ol, 1) for ol in range(n)] if last else [(0, n)]:
                em.store(
                    yv, obs[z0], y0, 0, g.wo, y1 - y0, nz, out_base + z0 * plan.th * g.wo, 1,
                    g.wo, plan.th * g.wo, lo=lo, hi=hi, prm=prm_base + obs[z0] - prm_first,
                )  # fmt: skip
            if last:
                _hoist_stores(em.steps, bounds[-1])
    if bounds:
        _prefetch(em, bounds)
    return cycles


def _load_weights(em: Emitter, k: ConvConsts, taps: int, o0: int, o1: int) -> None:
    """One LOAD of the resident weight blocks of output blocks ``[o0, o1)``."""
    pk = k.packed
    first, end = pk.first[o0], pk.first[o1 - 1] + pk.ib_n[o1 - 1] * taps
    em.load_run(isa.Buffer.WGT, first, k.wgt + first * em.B * em.B, end - first)


def _conflict(a: Step, b: Step) -> bool:
    """Whether `a` and `b` touch one row or byte and one of them writes it."""
    pairs = [(x, y) for x in a.writes for y in b.reads + b.writes]
    pairs += [(x, y) for x in a.reads for y in b.writes]
    return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x, y in pairs)


def _hoist_stores(steps: list[Step], start: int) -> None:
    """Move each STORE of ``steps[start:]`` up to just after the last step there it conflicts
    with: the order of every conflicting pair is kept, so tokens still order the same."""
    out: list[Step] = []
    for st in steps[start:]:
        if isinstance(st.insn, isa.Store):
            at = max((i + 1 for i, o in enumerate(out) if _conflict(st, o)), default=0)
            out.insert(at, st)
        else:
            out.append(st)
    steps[start:] = out


def _prefetch(em: Emitter, bounds: list[int]) -> None:
    """Move each tile's LOADs before the previous tile's COMPUTE and STORE steps.

    The engine fetches in program order into short per-unit queues, so a LOAD behind a
    tile's GEMMs is only fetched when the GEMMs are nearly done: with short GEMMs (7x7
    layers) the next tile's weights would then arrive late every time. Hoisting is done only
    where it cannot change what any step reads: the tile's LOADs all come before its other
    steps, write no rows the previous tile's steps touch (the other half) and read nothing
    they write.
    """
    steps = em.steps
    ends = [*bounds[1:], len(steps)]
    groups = [steps[a:b] for a, b in zip(bounds, ends, strict=True)]
    out = list(steps[: bounds[0]])
    pending: list = []  # the previous tile's non-LOAD steps
    for grp in groups:
        loads = [st for st in grp if isinstance(st.insn, isa.Load)]
        rest = [st for st in grp if not isinstance(st.insn, isa.Load)]
        ordered = grp[: len(loads)] == loads
        touched = {acc for st in pending for acc in st.reads + st.writes}
        written = {acc for st in pending for acc in st.writes}
        clash = any(
            sp == sp2 and a < b2 and a2 < b
            for st in loads
            for (sp, a, b), against in [(w, touched) for w in st.writes]
            + [(r, written) for r in st.reads]
            for sp2, a2, b2 in against
        )
        if ordered and not clash:
            out += loads + pending
            pending = rest
        else:
            out += pending + grp
            pending = []
    out += pending
    assert len(out) == len(steps)
    em.steps[:] = out


class _AccTile:
    """The accumulators of one output block of one tile, and whether they hold the bias yet."""

    def __init__(
        self, em: Emitter, g: ConvGeom, pw: int, y0: int, y1: int, base: int, bias: int
    ) -> None:
        self.em, self.g, self.pw = em, g, pw
        self.y0, self.y1, self.base, self.bias = y0, y1, base, bias
        self.started = False

    def gemm(self, ya: int, yb: int, inp: int, wgt: int, inner: tuple[int, int, int]) -> int:
        """GEMM over output rows ``[ya, yb)``, all columns, and an inner loop ``(n, inp, wgt)``.

        The first GEMM starts from the bias when it covers the whole tile; otherwise a VEC
        MOV of the bias comes first. Returns the GEMM's cycles.
        """
        g = self.g
        if not self.started and (ya, yb) != (self.y0, self.y1):
            _bias_init(self.em, self.base, self.bias, self.y1 - self.y0, g.wo)
            self.started = True
        init = isa.GemmInit.ACC if self.started else isa.GemmInit.BIAS
        self.started = True
        return self.em.gemm(
            self.base + (ya - self.y0) * g.wo,
            inp,
            wgt,
            [
                (g.wo, 1, g.sw, 0),
                (yb - ya, g.wo, g.sh * self.pw, 0),
                (inner[0], 0, inner[1], inner[2]),
            ],
            init,
            self.bias,
        )


def _bias_init(em: Emitter, dst: int, bias_row: int, rows: int, cols: int) -> None:
    """Accumulators of a tile = the bias row (VEC MOV), for tiles no GEMM covers whole."""
    em.vec(isa.VecFunc.MOV, dst, bias_row, [(cols, 1, 0, 0), (rows, cols, 0, 0)], a_acc=True)
