"""The emitter: builds instructions as `Step` s with the resources they touch.

`Emitter` is shared by the per-operator lowerings. Its helpers take plain arguments
(views, rows, loop counts), build one instruction each and derive its reads and writes
from the instruction's own fields (bounding row intervals of the affine loops), so the
token pass sees exactly what the golden model checks. Buffers are used in two halves
(`Emitter.slot`) so that a LOAD can fill one while COMPUTE works on the other, and
COMPUTE can fill one accumulator half while STORE drains the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from xrt.hw import isa
from xrt.hw.config import NpuConfig
from xrt.npu.compiler._layout import View
from xrt.npu.compiler._pack import ConstBlob
from xrt.npu.compiler._tokens import Access, Step

__all__ = ["CONST_BASE", "MAX_COUNT", "Emitter", "span"]

MAX_COUNT = 1023
"""Largest loop count / LOAD and STORE extent an instruction field holds."""
CONST_BASE = 0
"""Base register of the constant blob."""


def span(base: int, loops: list[tuple[int, int]]) -> tuple[int, int]:
    """``[lo, hi)`` reached by ``base + sum(i_k * stride_k)`` over loops ``(count, stride)``."""
    lo = hi = base
    for count, stride in loops:
        reach = (count - 1) * stride
        lo += min(0, reach)
        hi += max(0, reach)
    return lo, hi + 1


def _planes(
    base: int,
    offset: int,
    xl: tuple[int, int],
    yl: tuple[int, int],
    zl: tuple[int, int],
    elem: int,
) -> list[Access]:
    """Memory bytes of a 3-D tile, one range per plane when the planes are apart.

    One bounding range over all planes would also cover every other row of the planes in
    between, and order a layer's first LOAD after nearly all of the previous layer's STOREs;
    per-plane ranges let the next layer start once its first rows are written.
    """
    (z, zs) = zl
    lo, hi = span(offset, [xl, yl])
    if z > 64 or zs < hi - lo + elem - 1:
        lo, hi = span(offset, [xl, yl, zl])
        return [(f"mem{base}", lo, hi - 1 + elem)]
    return [(f"mem{base}", lo + k * zs, hi - 1 + elem + k * zs) for k in range(z)]


@dataclass
class Emitter:
    """Collects the steps of one program and the constant blob they load from."""

    cfg: NpuConfig
    steps: list[Step] = field(default_factory=list)
    tags: list[int] = field(default_factory=list)
    blob: ConstBlob | None = None
    tag: int = 0
    _flip: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.blob is None:
            self.blob = ConstBlob(self.cfg.block)

    @property
    def B(self) -> int:  # noqa: N802 - the ISA's name for the block
        return self.cfg.block

    def rows(self, buffer: str) -> int:
        """Rows of `buffer`."""
        c = self.cfg
        return {
            "INP": c.inp_rows,
            "WGT": c.wgt_rows,
            "ACC": c.acc_rows,
            "PRM": c.prm_rows,
            "LUT": c.lut_tables * 256 // c.block,
        }[buffer]

    def half(self, buffer: str) -> int:
        """Rows of one half of `buffer` (the unit of double buffering)."""
        return self.rows(buffer) // 2

    def slot(self, buffer: str) -> int:
        """First row of the next half of `buffer` (alternates between the two halves)."""
        k = self._flip.get(buffer, 0)
        self._flip[buffer] = k ^ 1
        return k * self.half(buffer)

    def slot_lut(self) -> int:
        """The next LUT table (round robin over the tables)."""
        k = self._flip.get("LUT", 0)
        self._flip["LUT"] = (k + 1) % self.cfg.lut_tables
        return k

    def const(self, arr: np.ndarray) -> int:
        """Offset of `arr` in the constant blob (appended once)."""
        assert self.blob is not None
        return self.blob.add(arr)

    def _add(self, insn: isa.Instruction, reads: list[Access], writes: list[Access]) -> None:
        self.steps.append(Step(insn, reads, writes))
        self.tags.append(self.tag)

    # -- LOAD / STORE ---------------------------------------------------------------

    def load(
        self,
        buffer: isa.Buffer,
        sram: int,
        base: int,
        offset: int,
        x: int,
        y: int = 1,
        z: int = 1,
        xs: int = 0,
        ys: int = 0,
        zs: int = 0,
        pads: tuple[int, int, int, int] = (0, 0, 0, 0),
        pad_min: bool = False,
    ) -> int:
        """One LOAD; pads are ``(top, bottom, left, right)``. Returns the rows written."""
        pt, pb, pl, pr = pads
        insn = isa.Load(
            buffer=buffer, pad_min=pad_min, base=base, sram=sram, offset=offset,
            x_size=x, y_size=y, z_size=z, pad_top=pt, pad_bottom=pb, pad_left=pl,
            pad_right=pr, x_stride=xs, y_stride=ys, z_stride=zs,
        )  # fmt: skip
        nrows = z * (pt + y + pb) * (pl + x + pr)
        elem = self.cfg.row_bytes(buffer.name)
        mem = _planes(base, offset, (x, xs), (y, ys), (z, zs), elem)
        self._add(insn, mem, [(buffer.name, sram, sram + nrows)])
        return nrows

    def load_run(self, buffer: isa.Buffer, sram: int, offset: int, nrows: int) -> None:
        """LOAD `nrows` consecutive rows of the constant blob (split to fit the fields)."""
        elem = self.cfg.row_bytes(buffer.name)
        done = 0
        while done < nrows:
            left = nrows - done
            if left >= MAX_COUNT:
                y = min(left // MAX_COUNT, MAX_COUNT)
                self.load(buffer, sram + done, CONST_BASE, offset + done * elem, MAX_COUNT, y,
                          xs=elem, ys=MAX_COUNT * elem)  # fmt: skip
                done += y * MAX_COUNT
            else:
                self.load(buffer, sram + done, CONST_BASE, offset + done * elem, left, xs=elem)
                done = nrows

    def load_view(
        self,
        sram: int,
        v: View,
        z0: int,
        nz: int,
        y0: int,
        ny: int,
        pads: tuple[int, int, int, int] = (0, 0, 0, 0),
        pad_min: bool = False,
        x0: int = 0,
        nx: int | None = None,
    ) -> int:
        """LOAD planes ``[z0, z0+nz)``, rows ``[y0, y0+ny)`` of a view into INP."""
        nx = v.cols - x0 if nx is None else nx
        return self.load(
            isa.Buffer.INP, sram, v.base, v.at(z0, y0, x0), nx, ny, nz,
            v.x_stride, v.y_stride, v.z_stride, pads, pad_min,
        )  # fmt: skip

    def store(
        self,
        v: View,
        z0: int,
        y0: int,
        x0: int,
        nx: int,
        ny: int,
        nz: int,
        sram: int,
        sxs: int,
        sys_: int,
        szs: int,
        m: int = 1,
        s: int = 0,
        lo: int = -128,
        hi: int = 127,
        prm: int | None = None,
    ) -> None:
        """One requantizing STORE of accumulator rows into a window of `v`.

        Per-tensor ``(m, s)`` as immediates, or per-lane from PRM rows ``prm + z``.
        """
        use_prm = prm is not None
        insn = isa.Store(
            mode=isa.StoreMode.INT8, use_prm=use_prm, base=v.base, sram=sram,
            offset=v.at(z0, y0, x0), x_size=nx, y_size=ny, z_size=nz, lo=lo, hi=hi,
            x_stride=v.x_stride, y_stride=v.y_stride, z_stride=v.z_stride,
            sram_x_stride=sxs, sram_y_stride=sys_, sram_z_stride=szs,
            shift=0 if use_prm else s, m_or_prm=prm if use_prm else m & 0xFFFF,
        )  # fmt: skip
        alo, ahi = span(sram, [(nx, sxs), (ny, sys_), (nz, szs)])
        reads: list[Access] = [("ACC", alo, ahi)]
        if use_prm:
            assert prm is not None
            reads.append(("PRM", prm, prm + nz))
        loops = (nx, v.x_stride), (ny, v.y_stride), (nz, v.z_stride)
        self._add(insn, reads, _planes(v.base, v.at(z0, y0, x0), *loops, self.B))

    # -- COMPUTE --------------------------------------------------------------------

    def gemm(
        self,
        acc: int,
        inp: int,
        wgt: int,
        loops: list[tuple[int, int, int, int]],
        init: isa.GemmInit = isa.GemmInit.ACC,
        bias: int = 0,
    ) -> int:
        """One GEMM; `loops` are up to three ``(count, acc_stride, inp_stride, wgt_stride)``,
        innermost first. Returns its cycles (the product of the counts)."""
        loops = list(loops) + [(1, 0, 0, 0)] * (3 - len(loops))
        (n0, a0, i0, w0), (n1, a1, i1, w1), (n2, a2, i2, w2) = loops
        insn = isa.Gemm(
            init=init, acc=acc, inp=inp, wgt=wgt, bias=bias, n0=n0, n1=n1, n2=n2,
            acc_s0=a0, inp_s0=i0, wgt_s0=w0, acc_s1=a1, inp_s1=i1, wgt_s1=w1,
            acc_s2=a2, inp_s2=i2, wgt_s2=w2,
        )  # fmt: skip
        arange = span(acc, [(n, a) for n, a, _, _ in loops])
        reads: list[Access] = [
            ("INP", *span(inp, [(n, i) for n, _, i, _ in loops])),
            ("WGT", *span(wgt, [(n, w) for n, _, _, w in loops])),
            ("ACC", *arange),
        ]
        if init == isa.GemmInit.BIAS:
            reads.append(("ACC", bias, bias + 1))
        self._add(insn, reads, [("ACC", *arange)])
        return n0 * n1 * n2

    def vec(
        self,
        func: isa.VecFunc,
        dst: int,
        a: int,
        loops: list[tuple[int, int, int, int]],
        a_acc: bool = False,
        b: int = 0,
        b_acc: bool = False,
        ma: int = 0,
        mb: int = 0,
    ) -> None:
        """One VEC; `loops` are up to two ``(count, dst_stride, a_stride, b_stride)``."""
        loops = list(loops) + [(1, 0, 0, 0)] * (2 - len(loops))
        (n0, d0, as0, bs0), (n1, d1, as1, bs1) = loops
        insn = isa.Vec(
            func=func, a_acc=a_acc, b_acc=b_acc, dst=dst, a=a, b=b, n0=n0, n1=n1,
            dst_s0=d0, a_s0=as0, b_s0=bs0, dst_s1=d1, a_s1=as1, b_s1=bs1, ma=ma, mb=mb,
        )  # fmt: skip
        drange = span(dst, [(n, d) for n, d, _, _ in loops])
        reads: list[Access] = [
            ("ACC" if a_acc else "INP", *span(a, [(n, s) for n, _, s, _ in loops]))
        ]
        if func == isa.VecFunc.LUT:
            per = 256 // self.B
            reads.append(("LUT", b * per, b * per + per))
        elif func != isa.VecFunc.MOV:
            reads.append(("ACC" if b_acc else "INP", *span(b, [(n, s) for n, _, _, s in loops])))
        self._add(insn, reads, [("ACC", *drange)])
