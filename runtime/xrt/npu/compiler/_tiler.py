"""The convolution tiler: fit a layer into the buffers and choose what stays resident.

A convolution (a dense layer is a 1 x N convolution) is computed in tiles of ``th`` output
rows x all output columns x ``n_ob`` output channel blocks, reading ``n_ib`` input channel
blocks at a time. Every half of a buffer holds one tile's operands, so the next tile loads
while this one computes (double buffering); a whole operand that fits the full buffer is
loaded once and stays resident. Among the tilings that fit, `plan_conv` picks the one
with the lowest estimated time (busiest unit plus what double buffering cannot hide), as
Gemmini's ``tiled_conv_auto`` picks the largest tile that fits. ``str(plan)`` prints the choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from xrt.hw.config import NpuConfig

__all__ = ["ConvGeom", "ConvPlan", "PlanChoice", "conv_candidates", "plan_conv"]

_MAX = 1023


@dataclass(frozen=True)
class ConvGeom:
    """Geometry of one convolution image: input ``(C, H, W)``, output ``(O, Ho, Wo)``."""

    c: int
    h: int
    w: int
    o: int
    ho: int
    wo: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    ib_n: tuple[int, ...]  # input blocks each output block reads

    @property
    def pad_right(self) -> int:
        """Padding columns needed right of the input (<= the op's right pad)."""
        last = (self.wo - 1) * self.sw - self.pl + (self.kw - 1) * self.dw
        return max(0, last - (self.w - 1))

    @property
    def padded_w(self) -> int:
        """Width of an input tile row in INP (left pad + W + needed right pad)."""
        return self.pl + self.w + self.pad_right

    def rows_in(self, th: int) -> int:
        """Input rows a tile of `th` output rows can need."""
        return min(self.h, (th - 1) * self.sh + (self.kh - 1) * self.dh + 1)

    @property
    def macs(self) -> int:
        """Useful multiply-accumulates of the image (real channels only)."""
        return self.o * self.ho * self.wo * self.kh * self.kw * max(1, self.c_per_group)

    c_per_group: int = 0


@dataclass(frozen=True)
class PlanChoice:
    """The free parameters of a tiling: what a tuning record stores (`xrt.tuning`).

    Everything else of a `ConvPlan` (residency, estimate) follows from these and the layer.
    """

    th: int
    n_ob: int
    n_ib: int
    order: str

    def to_list(self) -> list[int | str]:
        """``[th, n_ob, n_ib, order]`` (JSON)."""
        return [self.th, self.n_ob, self.n_ib, self.order]

    @classmethod
    def from_list(cls, data: object) -> PlanChoice:
        """The inverse of `to_list`; ValueError when `data` is not of that form."""
        if not isinstance(data, list | tuple) or len(data) != 4:
            raise ValueError(f"a plan choice is [th, n_ob, n_ib, order], got {data!r}")
        th, n_ob, n_ib, order = data
        if not all(type(v) is int for v in (th, n_ob, n_ib)) or order not in ("rows", "ob"):
            raise ValueError(f"a plan choice is [th, n_ob, n_ib, 'rows'|'ob'], got {data!r}")
        return cls(th, n_ob, n_ib, order)


@dataclass(frozen=True)
class ConvPlan:
    """A tiling of one convolution (see the module docstring)."""

    th: int
    n_ob: int
    n_ib: int
    order: str  # "rows": row tiles outer, output block chunks inner; "ob": the reverse
    wgt_resident: bool
    inp_resident: bool
    estimate: int  # estimated cycles (see plan_conv)
    geom: ConvGeom

    @property
    def choice(self) -> PlanChoice:
        """The plan's free parameters (what a tuning record stores)."""
        return PlanChoice(self.th, self.n_ob, self.n_ib, self.order)

    def __str__(self) -> str:
        g = self.geom
        zo = -(-g.o // 16)
        return (
            f"conv {g.c}x{g.h}x{g.w} -> {g.o}x{g.ho}x{g.wo} k{g.kh}x{g.kw} s{g.sh}x{g.sw}: "
            f"tile {self.th} rows x {g.wo} cols x {self.n_ob} out blocks (of {zo}), "
            f"{self.n_ib} in blocks per pass, loop {self.order}-outer, "
            f"weights {'resident' if self.wgt_resident else 'streamed'}, "
            f"input {'resident' if self.inp_resident else 'streamed'}, "
            f"~{self.estimate} cycles est."
        )


def plan_conv(g: ConvGeom, cfg: NpuConfig, choice: PlanChoice | None = None) -> ConvPlan | str:
    """The fastest tiling of `g` that fits the buffers, or the reason none does.

    Each candidate's time is estimated as its busiest unit (GEMM cycles plus issue
    overhead, LOAD beats, STORE beats) plus what double buffering cannot hide: the first
    input tile, weights that must arrive before the first GEMM, and the last tile's STORE.
    That favours a few tiles over one (so stores overlap compute) and resident weights
    over weights re-read per row tile.

    With `choice` (a tuning record's), the tiling with those parameters, validated: it must
    be one of the candidates `conv_candidates` enumerates with ``wide=True`` (so every
    operand fits its buffer); else the reason it is not legal for this layer.
    """
    found = _candidates(g, cfg, wide=choice is not None)
    if isinstance(found, str):
        return found
    if choice is not None:
        for plan, _, _ in found:
            if plan.choice == choice:
                return plan
        return f"tiling {choice.to_list()} is not one this layer can use ({_shape(g)})"
    best: ConvPlan | None = None
    best_key: tuple[int, int, int] | None = None
    for plan, default, key in found:
        if default and (best_key is None or key < best_key):
            best, best_key = plan, key
    assert best is not None
    return best


def conv_candidates(g: ConvGeom, cfg: NpuConfig, wide: bool = True) -> list[ConvPlan] | str:
    """Every tiling of `g` that fits the buffers, lowest estimate first, or why none does.

    ``wide=False`` gives the set `plan_conv` picks its default from (per output block count,
    only the largest input slice that fits, and tiles of th_max, 1/2, 1/4 and 1/8 of it);
    ``wide=True`` (what tuning measures) adds every smaller input slice and the tile
    heights that split the output rows into 1..16 equal tiles.
    """
    found = _candidates(g, cfg, wide)
    if isinstance(found, str):
        return found
    return [p for p, _, _ in sorted(found, key=lambda c: c[2])]


def _shape(g: ConvGeom) -> str:
    return f"conv {g.c}x{g.h}x{g.w} -> {g.o}x{g.ho}x{g.wo} k{g.kh}x{g.kw} s{g.sh}x{g.sw}"


_Candidate = tuple[ConvPlan, bool, tuple[int, int, int]]


def _candidates(g: ConvGeom, cfg: NpuConfig, wide: bool) -> list[_Candidate] | str:
    """The tilings that fit, in the order the default search visits them, each with whether
    it is in the default set (see `conv_candidates`) and its rank (lower is better: the
    estimate, then fewer tile passes, then taller tiles)."""
    b = cfg.block
    zo = len(g.ib_n)
    zi = -(-g.c // b)
    taps = g.kh * g.kw
    pw = g.padded_w
    if g.wo > _MAX or g.w > _MAX:
        return f"width {max(g.w, g.wo)} exceeds the {_MAX} columns a loop can count"
    inp_half, wgt_half, acc_half = cfg.inp_rows // 2, cfg.wgt_rows // 2, cfg.acc_rows // 2
    max_ib = max(g.ib_n)
    wgt_total = sum(g.ib_n) * taps
    wgt_beats = wgt_total * b  # a B x B block is B beats of B bytes
    out_beats = zo * g.ho * g.wo
    gemm_cycles = wgt_total * g.ho * g.wo
    out: list[_Candidate] = []
    for n_ob in range(1, min(zo, cfg.prm_rows // 2) + 1):
        th_acc = min(g.ho, _MAX, (acc_half - n_ob) // (n_ob * g.wo))
        if th_acc < 1:
            break
        n_chunks = -(-zo // n_ob)
        first_ib = True
        for n_ib in _ib_choices(zi):
            ib_pass = min(n_ib, max_ib)
            wgt_res = n_ib >= max_ib and wgt_total <= cfg.wgt_rows
            if not wgt_res and ib_pass * taps * n_ob > wgt_half:
                continue
            # The whole input resident in the full buffer (one row tile; passes over input
            # blocks then only split the weights), else tiles fitting a half.
            whole = th_acc == g.ho and zi * g.rows_in(g.ho) * pw <= cfg.inp_rows
            if whole:
                th_max = g.ho
            else:
                th_max = th_acc
                while th_max >= 1 and n_ib * g.rows_in(th_max) * pw > inp_half:
                    th_max -= 1
            if th_max < 1:
                continue
            passes = -(-zi // n_ib)
            usual = {th_max, -(-th_max // 2), -(-th_max // 4), -(-th_max // 8)}
            ths = set(usual)
            if wide:
                ths |= {-(-g.ho // n) for n in range(1, 17) if -(-g.ho // n) <= th_max}
            for th in sorted(ths):
                if th < th_max and n_ib * g.rows_in(th) * pw > inp_half:
                    continue
                n_tiles = -(-g.ho // th)
                steps = n_tiles * n_chunks
                inp_res = n_tiles == 1 and whole
                in_beats = zi * g.rows_in(th) * n_tiles * g.w
                gemms = steps * (n_ob * passes if taps == 1 else sum(g.ib_n[:n_ob]) * g.kh)
                compute = gemm_cycles + 2 * gemms
                store = out_beats + 34 * steps
                first_in = zi * g.rows_in(th) * g.w // (1 if inp_res else passes)
                last_out = out_beats // steps
                for order in ("rows", "ob"):
                    # The input is read again per output block chunk unless it stays in
                    # INP: resident, or one pass per tile with the chunks inner.
                    once = inp_res or (order == "rows" and passes == 1)
                    load = in_beats * (1 if once else n_chunks)
                    if order == "rows":
                        load += wgt_beats if wgt_res else wgt_beats * n_tiles
                    else:
                        load += wgt_beats
                    first_w = wgt_beats if wgt_res else wgt_beats // n_chunks
                    est = max(compute, load, store) + first_in + first_w + last_out + 64
                    est += 150 * steps * passes  # per-tile bubbles: burst latencies, syncs
                    plan = ConvPlan(th, n_ob, n_ib, order, wgt_res, inp_res, est, g)
                    out.append((plan, first_ib and th in usual, (est, steps * passes, -th)))
            if not wide:
                break
            first_ib = False
    if not out:
        return (
            f"no tiling fits: one output row of {g.wo} columns with a {g.kh}x{g.kw} window over "
            f"{g.c} channels needs more than the buffers hold"
        )
    return out


def _ib_choices(n: int) -> list[int]:
    """Input block slice sizes to try, largest first (at most `_MAX`: a LOAD's plane count
    and a GEMM's loop count)."""
    out = [n]
    k = n
    while k > 1:
        k = -(-k // 2)
        out.append(k)
    return [k for k in out if k <= _MAX]
