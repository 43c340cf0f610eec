"""The convolution tiler: fit a layer into the buffers and choose what stays resident.

A convolution (a dense layer is a 1 x N convolution) is computed in tiles of ``th`` output
rows x all output columns x ``n_ob`` output channel blocks, reading ``n_ib`` input channel
blocks at a time. Every half of a buffer holds one tile's operands, so the next tile loads
while this one computes (double buffering); a whole operand that fits the full buffer is
loaded once and stays resident. Among the tilings that fit, `plan_conv` picks the one
moving the fewest bytes (weights re-read per row tile, or inputs re-read per output block
chunk, whichever loop order costs less), then the one with the fewest tiles, as Gemmini's
``tiled_conv_auto`` picks the largest tile that fits. ``str(plan)`` prints the choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from xrt.hwconfig import NpuConfig

__all__ = ["ConvGeom", "ConvPlan", "plan_conv"]

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
class ConvPlan:
    """A tiling of one convolution (see the module docstring)."""

    th: int
    n_ob: int
    n_ib: int
    order: str  # "rows": row tiles outer, output block chunks inner; "ob": the reverse
    wgt_resident: bool
    inp_resident: bool
    traffic: int  # estimated bus beats
    geom: ConvGeom

    def __str__(self) -> str:
        g = self.geom
        zo = -(-g.o // 16)
        return (
            f"conv {g.c}x{g.h}x{g.w} -> {g.o}x{g.ho}x{g.wo} k{g.kh}x{g.kw} s{g.sh}x{g.sw}: "
            f"tile {self.th} rows x {g.wo} cols x {self.n_ob} out blocks (of {zo}), "
            f"{self.n_ib} in blocks per pass, loop {self.order}-outer, "
            f"weights {'resident' if self.wgt_resident else 'streamed'}, "
            f"input {'resident' if self.inp_resident else 'streamed'}, "
            f"~{self.traffic} beats"
        )


def plan_conv(g: ConvGeom, cfg: NpuConfig) -> ConvPlan | str:
    """The cheapest tiling of `g` that fits the buffers, or the reason none does."""
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
    best: ConvPlan | None = None
    best_key: tuple[int, int, int] | None = None
    for n_ob in range(1, min(zo, cfg.prm_rows // 2) + 1):
        th_acc = min(g.ho, _MAX, (acc_half - n_ob) // (n_ob * g.wo))
        if th_acc < 1:
            break
        n_chunks = -(-zo // n_ob)
        for n_ib in _ib_choices(zi):
            ib_pass = min(n_ib, max_ib)
            wgt_res = n_ib >= max_ib and wgt_total <= cfg.wgt_rows
            if not wgt_res and ib_pass * taps * n_ob > wgt_half:
                continue
            # Whole input resident in the full buffer, else the largest tile fitting a half.
            if n_ib >= zi and th_acc == g.ho and zi * g.rows_in(g.ho) * pw <= cfg.inp_rows:
                th = g.ho
            else:
                th = th_acc
                while th >= 1 and n_ib * g.rows_in(th) * pw > inp_half:
                    th -= 1
            if th < 1:
                continue
            n_tiles = -(-g.ho // th)
            inp_res = n_tiles == 1 and n_ib >= zi
            in_beats = zi * g.rows_in(th) * n_tiles * g.w
            cost_rows = in_beats + (wgt_beats if wgt_res else wgt_beats * n_tiles) + out_beats
            cost_ob = (in_beats if inp_res else in_beats * n_chunks) + wgt_beats + out_beats
            passes = -(-zi // n_ib)
            for order, cost in (("rows", cost_rows), ("ob", cost_ob)):
                key = (cost, n_tiles * n_chunks * passes, -th)
                if best_key is None or key < best_key:
                    best_key = key
                    best = ConvPlan(th, n_ob, n_ib, order, wgt_res, inp_res, cost, g)
            break
    if best is None:
        return (
            f"no tiling fits: one output row of {g.wo} columns with a {g.kh}x{g.kw} window over "
            f"{g.c} channels needs more than the buffers hold"
        )
    return best


def _ib_choices(n: int) -> list[int]:
    """Input block slice sizes to try, largest first."""
    out = [n]
    k = n
    while k > 1:
        k = -(-k // 2)
        out.append(k)
    return out
