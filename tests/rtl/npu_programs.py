"""Programs for the whole-NPU tests and bench/bench_compute.py (one source for both).

* `HandConv`: a k x k convolution (stride 1, same padding, C -> C channels, bias,
  per-channel requantization) compiled by hand into a double-buffered engine program: row
  tiles alternate between the halves of INP and ACC, weights stay resident and are loaded
  one output block at a time, each with its own token, so the first GEMMs start after one
  block's weights and one tile's input; the next tile's input loads while this tile's GEMMs
  run, and each output block's STORE drains while the next block computes.
* `real_layers`: small networks of one real layer each (a conv, a depthwise conv, a
  residual add, max and average pooling, concatenation, channel shuffle, flatten) for the
  compiler;
* `place_compiled` / `read_outputs`: the memory images and base registers of a program
  the compiler (`xrt.npu.compiler.compile_run`) made: the program, then one 4 KiB-aligned
  region per base register (as `run_on_golden` places them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xrt.dtypes import QuantParams, TensorType
from xrt.hw import isa
from xrt.hw.isa import Buffer, GemmInit, StoreMode
from xrt.hw.targets import NPU
from xrt.network import Network, NetworkBuilder
from xrt.npu.compiler import NpuProgram, from_tiled, to_tiled
from xrt.ops import intmath
from xrt.ops.conv import qconv2d_forward
from xrt.ops.pool import pool_counts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "npu"))
from npu_util import single

__all__ = ["HandConv", "place_compiled", "read_outputs", "real_layers"]

B = NPU.block
_ALIGN = 4096


def _align(n: int) -> int:
    return -(-max(n, 1) // _ALIGN) * _ALIGN


@dataclass
class HandConv:
    """The layer (NCHW int8 tensors drawn from `seed`), its memory images and program.

    Base registers: 0 input, 1 weights, 2 bias, 3 PRM rows, 4 output. `th` is the row
    tile height (the whole image when it is `h`).
    """

    c: int
    h: int
    w: int
    k: int
    th: int
    lo: int = -128
    hi: int = 127
    seed: int = 0
    tensors: dict[str, np.ndarray] = field(init=False, repr=False)

    ROLES = ("act", "wgt", "bias", "prm", "out")

    def __post_init__(self) -> None:
        assert self.c % B == 0 and self.k % 2 == 1, "C a multiple of B, odd k"
        rng = np.random.default_rng(self.seed)
        c, k = self.c, self.k
        self.tensors = {
            "x": rng.integers(-128, 128, size=(1, c, self.h, self.w), dtype=np.int8),
            "w": rng.integers(-128, 128, size=(c, c, k, k), dtype=np.int8),
            "bias": rng.integers(-20000, 20000, size=c, dtype=np.int32),
            "m": rng.integers(1 << 13, 1 << 15, size=c, dtype=np.int64),
            "s": rng.integers(18, 24, size=c, dtype=np.int64),
        }

    @property
    def g(self) -> int:
        """Channel blocks."""
        return self.c // B

    @property
    def gemm_cycles(self) -> int:
        """MAC-array cycles of the layer (what the GEMM_CYCLES counter must show)."""
        return self.g * self.g * self.k * self.k * self.h * self.w

    def reference(self) -> np.ndarray:
        """xrt's host QConv2d kernel on the same tensors."""
        t, p = self.tensors, self.k // 2
        op = type("Op", (), {})()
        op.attrs = {"strides": (1, 1), "pads": (p,) * 4, "dilations": (1, 1), "groups": 1,
                    "lo": self.lo, "hi": self.hi}  # fmt: skip
        op.op_type, op.name = "QConv2d", "conv"
        params = {"weight": t["w"], "bias": t["bias"], "multiplier": t["m"], "shift": t["s"]}
        return qconv2d_forward(op, [t["x"]], params)[0]

    def images(self) -> dict[str, bytes]:
        """Channel-tiled input, packed weight blocks (ob, ib, ky, kx, o, i), bias, PRM."""
        t, g, k = self.tensors, self.g, self.k
        blocks = t["w"].reshape(g, B, g, B, k, k).transpose(0, 2, 4, 5, 1, 3)
        return {
            "act": to_tiled(t["x"], B).tobytes(),
            "wgt": np.ascontiguousarray(blocks).tobytes(),
            "bias": t["bias"].tobytes(),
            "prm": ((t["s"] << 16) | (t["m"] & 0xFFFF)).astype(np.uint32).tobytes(),
            "out": bytes(self.c * self.h * self.w),
        }

    def layout(self, prog_at: int = 0) -> dict[str, int]:
        """Byte offsets of the program and of each image, 4 KiB aligned, from `prog_at`."""
        offsets = {"prog": prog_at}
        cursor = prog_at + _align(len(self.program()) * isa.INSN_BYTES)
        for name, blob in self.images().items():
            offsets[name] = cursor
            cursor += _align(len(blob))
        return offsets

    def out_tensor(self, raw: bytes) -> np.ndarray:
        """The NCHW output from the output image's bytes."""
        return from_tiled(raw, (1, self.c, self.h, self.w), B)

    def program(self) -> list[isa.Instruction]:
        """The double-buffered program (see the module docstring)."""
        g, h, w, k, th = self.g, self.h, self.w, self.k, self.th
        p = k // 2
        pw = w + 2 * p
        taps = k * k
        tiles = [(y0, min(h, y0 + th)) for y0 in range(0, h, th)]
        n = len(tiles)
        inp_half, acc_half = NPU.inp_rows // 2, NPU.acc_rows // 2
        bias_row = NPU.acc_rows - g
        assert g * (th + 2 * p) * pw <= inp_half and g * th * w <= min(acc_half, bias_row)
        assert g * g * taps <= NPU.wgt_rows

        def load_inp(t: int) -> isa.Load:
            y0, y1 = tiles[t]
            a, b = max(0, y0 - p), min(h, y1 + p)
            return isa.Load(
                buffer=Buffer.INP, base=0, sram=(t % 2) * inp_half, offset=a * w * B,
                x_size=w, y_size=b - a, z_size=g, x_stride=B, y_stride=w * B,
                z_stride=h * w * B, pad_top=a - (y0 - p), pad_bottom=(y1 + p) - b,
                pad_left=p, pad_right=p, pop_next=t >= 2, push_next=t >= 1,
            )  # fmt: skip

        prog: list[isa.Instruction] = [
            isa.Load(buffer=Buffer.PRM, base=3, x_size=g, y_size=1, z_size=1, x_stride=4 * B),
            isa.Load(buffer=Buffer.ACC, base=2, sram=bias_row, x_size=g, y_size=1, z_size=1,
                     x_stride=4 * B),
            load_inp(0),
        ]  # fmt: skip
        for ob in range(g):  # weights one output block at a time, each with its token
            prog.append(
                isa.Load(buffer=Buffer.WGT, base=1, sram=ob * g * taps,
                         offset=ob * g * taps * B * B, x_size=g * taps, y_size=1, z_size=1,
                         x_stride=B * B, push_next=True)
            )  # fmt: skip
        for t, (y0, y1) in enumerate(tiles):
            if t + 1 < n:
                prog.append(load_inp(t + 1))
            rows = y1 - y0
            plane = (rows + 2 * p) * pw
            inp0, acc0 = (t % 2) * inp_half, (t % 2) * acc_half
            for ob in range(g):
                gemms = []
                loops = (
                    [(ib, ky) for ib in range(g) for ky in range(k)] if k > 1 else [(0, 0)]
                )  # 1x1: the input block loop is the GEMM's outer loop
                for ib, ky in loops:
                    gemms.append(
                        isa.Gemm(
                            init=GemmInit.BIAS if not gemms else GemmInit.ACC,
                            acc=acc0 + ob * th * w,
                            inp=inp0 + ib * plane + ky * pw,
                            wgt=(ob * g + ib) * taps + ky * k,
                            bias=bias_row + ob,
                            n0=w, n1=rows, n2=k if k > 1 else g,
                            acc_s0=1, inp_s0=1, acc_s1=w, inp_s1=pw,
                            inp_s2=1 if k > 1 else plane, wgt_s2=1,
                        )
                    )  # fmt: skip
                last_ob = ob == g - 1
                gemms[0] = gemms[0].replace(
                    pop_prev=t == 0 or ob == 0,  # this block's weights / this tile's input
                    pop_next=t >= 2 and ob == 0,  # tile t-2's STOREs have left this ACC half
                )
                gemms[-1] = gemms[-1].replace(push_next=True, push_prev=last_ob and t + 2 < n)
                prog += gemms
                prog.append(
                    isa.Store(
                        mode=StoreMode.INT8, use_prm=True, m_or_prm=ob, base=4,
                        sram=acc0 + ob * th * w, offset=(ob * h + y0) * w * B,
                        x_size=w, y_size=rows, z_size=1, x_stride=B, y_stride=w * B,
                        sram_x_stride=1, sram_y_stride=w, lo=self.lo, hi=self.hi,
                        pop_prev=True, push_prev=last_ob and t + 2 < n,
                    )
                )  # fmt: skip
        return [*prog, isa.Finish()]


def place_compiled(
    prog: NpuProgram, feeds: Mapping[str, np.ndarray], start: int
) -> tuple[dict[int, bytes], dict[int, int], int]:
    """Lay a compiled program out from byte offset `start` of one memory.

    Returns ``(images, bases, end)``: bytes to write at each offset (the program, the
    constant blob, the channel-tiled inputs), each base register's offset, and the first
    offset after the layout. Outputs and scratch get their room, zeroed.
    """
    images = {start: prog.encode()}
    cursor = start + _align(prog.program_bytes)
    bases = {}
    for role in prog.bases:
        bases[role.index] = cursor
        images[cursor] = bytes(role.size)
        cursor += _align(role.size)
    images[bases[0]] = prog.constants
    for b in prog.inputs:
        data = to_tiled(np.asarray(feeds[b.name], dtype=np.int8).reshape(b.shape), prog.block)
        data = data.tobytes()
        images[bases[b.base] + b.offset] = data
    return images, bases, cursor


def read_outputs(
    prog: NpuProgram, bases: Mapping[int, int], read: Callable[[int, int], bytes]
) -> dict[str, np.ndarray]:
    """The program's NCHW outputs, read with ``read(offset, nbytes)``."""
    return {
        b.name: from_tiled(read(bases[b.base] + b.offset, b.nbytes), b.shape, prog.block)
        for b in prog.outputs
    }


def real_layers(rng: np.random.Generator) -> list[tuple[str, Network, dict[str, np.ndarray]]]:
    """``(name, network, feeds)`` of one small real layer each, int8 with random parameters:
    a 3x3 conv (24 -> 20 channels, stride 1), a 3x3 depthwise conv (stride 2), a residual
    add (QAdd), a 3x3/2 max pool and a 3x3/2 average pool (padding counted out), and the
    lane-crossing data movement of `xrt.npu.compiler._movement`: a channel concatenation of
    unaligned inputs, a channel shuffle (Reshape, Transpose, Reshape) and a Flatten."""

    def i8(*shape: int) -> np.ndarray:
        return rng.integers(-128, 128, size=shape, dtype=np.int8)

    def conv(c: int, o: int, groups: int, stride: int) -> tuple[Network, dict]:
        params = {
            "weight": rng.integers(-127, 128, size=(o, c // groups, 3, 3), dtype=np.int8),
            "bias": rng.integers(-30000, 30000, o).astype(np.int32),
            "multiplier": rng.integers(1 << 13, 1 << 15, o).astype(np.int32),
            "shift": rng.integers(12, 20, o).astype(np.int32),
        }
        attrs = {"strides": [stride] * 2, "pads": [1] * 4, "dilations": [1, 1],
                 "groups": groups, "lo": -128, "hi": 127, "out_scale": 1.0}  # fmt: skip
        return single("QConv2d", [i8(1, c, 7, 9)], attrs, params)

    pool = {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [1, 1],
            "ceil_mode": False}  # fmt: skip
    avg = dict(pool, count_include_pad=False, lo=-128, hi=127, out_scale=1.0)
    counts = np.unique(pool_counts(avg, 9, 9))
    avg["requant"] = [[int(k), *intmath.quantize_multiplier(1.0 / int(k))] for k in counts]
    add = {"mult_a": 21000, "mult_b": 13000, "shift": 15, "lo": -128, "hi": 127,
           "out_scale": 1.0}  # fmt: skip
    return [
        ("conv 3x3", *conv(24, 20, 1, 1)),
        ("depthwise conv 3x3/2", *conv(32, 32, 32, 2)),
        ("residual add", *single("QAdd", [i8(1, 24, 6, 6), i8(1, 24, 6, 6)], add)),
        ("max pool 3x3/2", *single("MaxPool2d", [i8(1, 20, 9, 9)], pool)),
        ("average pool 3x3/2", *single("QAvgPool2d", [i8(1, 20, 9, 9)], avg)),
        ("concat 20 + 7", *single("Concat", [i8(1, 20, 5, 6), i8(1, 7, 5, 6)], {"axis": 1})),
        ("channel shuffle 3 x 8", *_shuffle(i8(1, 24, 5, 6), 3)),
        ("flatten 20x3x5", *single("Flatten", [i8(1, 20, 3, 5)], {"axis": 1})),
    ]


def _shuffle(x: np.ndarray, g: int) -> tuple[Network, dict[str, np.ndarray]]:
    """ShuffleNet's channel shuffle of `x` in `g` groups: one network of three operators."""
    n, c, h, w = x.shape
    b = NetworkBuilder("shuffle")
    v = b.input("x", TensorType("SInt8", x.shape, quant=QuantParams(1.0)))
    (v,) = b.add("Reshape", [v], {"shape": [n, g, c // g, h, w]})
    (v,) = b.add("Transpose", [v], {"perm": [0, 2, 1, 3, 4]})
    (v,) = b.add("Reshape", [v], {"shape": [n, c, h, w]})
    return b.build([v]), {"x": x}
