"""The programs bench/bench_compute.py runs: each layer hand-compiled and compiler-made.

A 3x3 and a 1x1 convolution (64 -> 64 channels, 16x16, same padding) as the double-buffered
hand-compiled program of `tests/rtl/npu_programs.py` and as `xrt.npu.compiler` compiles the
same layer (same tensors). Each case is a plddr image: bytes per offset, base registers
(offsets), the program's offset and length, and a check of the output against xrt's host
QConv2d kernel.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "rtl"))
from npu_programs import HandConv, place_compiled, read_outputs
from npu_util import single

from xrt.hw import isa
from xrt.hw.targets import NPU
from xrt.npu.compiler import compile_run

Reader = Callable[[int, int], bytes]


@dataclass
class Case:
    name: str
    program: list[isa.Instruction]
    images: dict[int, bytes]  # plddr offset -> bytes (the program at offset 0)
    bases: dict[int, int]  # base register -> plddr offset
    check: Callable[[Reader], bool]  # the output equals the host kernel's

    @property
    def gemm_cycles(self) -> int:
        return sum(i.n0 * i.n1 * i.n2 for i in self.program if isinstance(i, isa.Gemm))


def hand_case(conv: HandConv, name: str) -> Case:
    offsets = conv.layout()
    prog = conv.program()
    images = {offsets["prog"]: isa.encode_program(prog)}
    images.update((offsets[n], blob) for n, blob in conv.images().items())
    out, nbytes, want = offsets["out"], conv.c * conv.h * conv.w, conv.reference()
    return Case(
        name,
        prog,
        images,
        {r: offsets[n] for r, n in enumerate(conv.ROLES)},
        lambda read: bool(np.array_equal(conv.out_tensor(read(out, nbytes)), want)),
    )


def compiled_case(conv: HandConv, name: str) -> Case:
    t, p = conv.tensors, conv.k // 2
    params = {"weight": t["w"], "bias": t["bias"], "multiplier": t["m"].astype(np.int32),
              "shift": t["s"].astype(np.int32)}  # fmt: skip
    attrs = {"strides": [1, 1], "pads": [p] * 4, "dilations": [1, 1], "groups": 1,
             "lo": conv.lo, "hi": conv.hi, "out_scale": 1.0}  # fmt: skip
    net, feeds = single("QConv2d", [t["x"]], attrs, params)
    prog = compile_run(net, NPU)
    images, bases, _ = place_compiled(prog, feeds, 0)
    want = conv.reference()

    def check(read: Reader) -> bool:
        return bool(np.array_equal(read_outputs(prog, bases, read)[net.outputs[0]], want))

    return Case(name, prog.instructions, images, bases, check)


def cases() -> list[Case]:
    out = []
    for k in (3, 1):
        conv = HandConv(64, 16, 16, k, th=4)
        out.append(hand_case(conv, f"conv{k}x{k} 64ch 16x16, hand-compiled"))
        out.append(compiled_case(conv, f"conv{k}x{k} 64ch 16x16, compiler"))
    return out
