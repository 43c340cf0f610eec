"""cocotb side of the profile run (npuemu.sim.pgo): what a model compiled with gcc's
-fprofile-generate runs so that the final model is optimised for it.

Short and typical of what devices spend their cycles on: the engine idle with register
traffic, then compiler-made convolutions (3x3 and 1x1, 64 channels, 16x16) with the MAC
array busy, each output checked against xrt's host kernel (a wrong run would train the
compiler on an error path). About 150,000 cycles.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np

from npuemu.sim.core_driver import run_program
from npuemu.sim.harness import NpuHarness
from xrt.dtypes import QuantParams, TensorType
from xrt.hw.regops import RegRead
from xrt.hw.regs import NPU as NPU_REGS
from xrt.hw.targets import CLOCK_PERIOD_PS, NPU, target
from xrt.network import Network, NetworkBuilder
from xrt.npu.compiler import compile_run, from_tiled, to_tiled
from xrt.ops.conv import qconv2d_forward

_ALIGN = 4096


def _align(n: int) -> int:
    return -(-max(n, 1) // _ALIGN) * _ALIGN


def conv_network(k: int, seed: int) -> tuple[Network, dict[str, np.ndarray], np.ndarray]:
    """A quantized kxk convolution, 64 -> 64 channels at 16x16; feeds; the host's output."""
    rng = np.random.default_rng(seed)
    c, hw, p = 64, 16, k // 2
    x = rng.integers(-128, 128, (1, c, hw, hw), dtype=np.int8)
    params = {
        "weight": rng.integers(-128, 128, (c, c, k, k), dtype=np.int8),
        "bias": rng.integers(-2000, 2000, c, dtype=np.int32),
        "multiplier": rng.integers(1 << 13, 1 << 15, c, dtype=np.int32),
        "shift": np.full(c, 20, dtype=np.int32),
    }
    attrs = {"strides": [1, 1], "pads": [p] * 4, "dilations": [1, 1], "groups": 1,
             "lo": -128, "hi": 127, "out_scale": 1.0}  # fmt: skip
    b = NetworkBuilder("profile")
    name = b.input("x", TensorType("SInt8", x.shape, quant=QuantParams(1.0)))
    refs = {role: b.param(role, arr) for role, arr in params.items()}
    (y,) = b.add("QConv2d", [name], dict(attrs), refs)
    op = type("Op", (), {"attrs": attrs, "op_type": "QConv2d", "name": "conv"})()
    want = qconv2d_forward(op, [x], params)[0]
    return b.build([y]), {name: x}, want


@cocotb.test()
async def profile_workload(dut) -> None:
    cfg = target(os.environ["NPU_TARGET"])
    h = NpuHarness(dut, CLOCK_PERIOD_PS)
    await h.reset()
    plddr = cfg.memory("plddr")
    mem = np.memmap(os.environ["NPU_MEM_PLDDR"], np.uint8, "r+", shape=(plddr.size,))
    await h.run_cycles(20_000)
    await h.run_batch([RegRead(cfg.npu_base + NPU_REGS.offset("CORE_STATUS"))] * 500)
    for k in (3, 1):
        net, feeds, want = conv_network(k, seed=k)
        prog = compile_run(net, NPU)
        mem[: len(prog.encode())] = np.frombuffer(prog.encode(), np.uint8)
        cursor = _align(prog.program_bytes)
        bases: dict[int, int] = {}
        for role in prog.bases:
            bases[role.index] = cursor
            mem[cursor : cursor + role.size] = 0
            cursor += _align(role.size)
        mem[bases[0] : bases[0] + len(prog.constants)] = np.frombuffer(prog.constants, np.uint8)
        for buf in prog.inputs:
            tiled = to_tiled(feeds[buf.name].reshape(buf.shape), prog.block).tobytes()
            at = bases[buf.base] + buf.offset
            mem[at : at + len(tiled)] = np.frombuffer(tiled, np.uint8)
        res = await run_program(
            h,
            cfg.npu_base,
            plddr.base,
            len(prog.instructions),
            {r: plddr.base + off for r, off in bases.items()},
        )
        assert res.ok, res
        (out,) = prog.outputs
        at = bases[out.base] + out.offset
        got = from_tiled(bytes(mem[at : at + out.nbytes]), out.shape, prog.block)
        assert np.array_equal(got, want), f"the {k}x{k} convolution differs from the host's"
