"""Hand-compiled convolution programs for the compute-engine bench (k x k, stride 1, same
padding, C -> C channels, bias, per-channel requantization), with their memory images."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xrt.npu import isa
from xrt.npu.isa import Buffer, GemmInit, StoreMode

B = 16
OFFSETS = {
    "prog": 0x0,
    "act": 0x10000,
    "wgt": 0x100000,
    "bias": 0x200000,
    "prm": 0x210000,
    "out": 0x300000,
}
BIAS_ROW = 3000


@dataclass
class ConvCase:
    name: str
    c: int
    h: int
    w: int
    k: int

    def data(self, seed: int = 0) -> dict[str, bytes]:
        rng = np.random.default_rng(seed)
        g = self.c // B
        x = rng.integers(-128, 128, size=(g, self.h, self.w, B), dtype=np.int64)
        wt = rng.integers(-128, 128, size=(g, g, self.k, self.k, B, B), dtype=np.int64)
        bias = rng.integers(-20000, 20000, size=self.c, dtype=np.int64)
        m = rng.integers(1 << 13, 1 << 15, size=self.c, dtype=np.int64)
        s = rng.integers(18, 24, size=self.c, dtype=np.int64)
        return {
            "act": x.astype(np.int8).tobytes(),
            "wgt": wt.astype(np.int8).tobytes(),
            "bias": bias.astype(np.int32).tobytes(),
            "prm": ((s << 16) | (m & 0xFFFF)).astype(np.uint32).tobytes(),
        }

    def program(self) -> list:
        """BASE0 input, 1 weights, 2 bias, 3 PRM, 4 output."""
        g, h, w, k = self.c // B, self.h, self.w, self.k
        p = k // 2
        ph, pw = h + 2 * p, w + 2 * p
        prog = [
            isa.Load(
                buffer=Buffer.INP,
                base=0,
                x_size=w,
                y_size=h,
                z_size=g,
                x_stride=B,
                y_stride=w * B,
                z_stride=h * w * B,
                pad_top=p,
                pad_bottom=p,
                pad_left=p,
                pad_right=p,
            ),
            isa.Load(
                buffer=Buffer.WGT, base=1, x_size=g * g * k * k, y_size=1, z_size=1, x_stride=B * B
            ),
            isa.Load(
                buffer=Buffer.ACC,
                base=2,
                x_size=g,
                y_size=1,
                z_size=1,
                x_stride=4 * B,
                sram=BIAS_ROW,
            ),
            isa.Load(
                buffer=Buffer.PRM,
                base=3,
                x_size=g,
                y_size=1,
                z_size=1,
                x_stride=4 * B,
                push_next=True,
            ),
        ]
        gemms = []
        for ob in range(g):
            for ib in range(g):
                for ky in range(k):
                    gemms.append(
                        isa.Gemm(
                            init=GemmInit.BIAS if ib == 0 and ky == 0 else GemmInit.ACC,
                            acc=ob * h * w,
                            inp=ib * ph * pw + ky * pw,
                            wgt=((ob * g + ib) * k + ky) * k,
                            bias=BIAS_ROW + ob,
                            n0=w,
                            n1=h,
                            n2=k,
                            acc_s0=1,
                            inp_s0=1,
                            acc_s1=w,
                            inp_s1=pw,
                            inp_s2=1,
                            wgt_s2=1,
                        )
                    )
        gemms[0] = gemms[0].replace(pop_prev=True)
        gemms[-1] = gemms[-1].replace(push_next=True)
        return [
            *prog,
            *gemms,
            isa.Store(
                mode=StoreMode.INT8,
                use_prm=True,
                base=4,
                x_size=w,
                y_size=h,
                z_size=g,
                x_stride=B,
                y_stride=w * B,
                z_stride=h * w * B,
                sram_x_stride=1,
                sram_y_stride=w,
                sram_z_stride=h * w,
                lo=-128,
                hi=127,
                pop_prev=True,
            ),
            isa.Finish(),
        ]


CASES = [
    ConvCase("conv3x3 64ch 16x16", 64, 16, 16, 3),
    ConvCase("conv1x1 64ch 16x16", 64, 16, 16, 1),
]
