"""The compute engine inside the whole NPU (`npu_sim`) of each target, through the harness.

A 3x3 convolution (32 -> 32 channels, 8x8, padding 1, bias, per-channel requantization,
ReLU bounds) compiled by hand into an engine program runs bit-exact against xrt's QConv2d
kernel, launched with the driver sequence of docs/isa.md (registers from the generated
map). The program and tensors sit in plddr; on ZG330 the same program runs again on
tensors the DMA placed in the OCM, which the engine reaches faster than DDR. A bus error
(DECERR injected in plddr) ends a program with its code and one interrupt, and the next
program is correct. The DMA shares the memories through the same interconnect.
"""

from __future__ import annotations

import os
import random

import cocotb
import numpy as np
import pytest
from cocotbext.axi import AxiResp

from npuemu.sim.cocotb_run import run_cocotb
from npuemu.sim.core_driver import run_program
from npuemu.sim.dma_driver import DmaTransfer, run_dma
from npuemu.sim.harness import NpuHarness
from xrt._generated.hwconfig import CLOCK_PERIOD_PS
from xrt.hwconfig import target
from xrt.npu import isa
from xrt.npu.isa import Buffer, GemmInit, StoreMode
from xrt.ops.conv import qconv2d_forward

B = 16
C, H, W = 32, 8, 8  # channels in and out, height, width
G = C // B  # channel groups


@pytest.mark.sim
@pytest.mark.parametrize("target_name", ["buyi", "zg330"])
def test_npu_compute(target_name, sim_model, shm_dir, tmp_path):
    model = sim_model(target_name)
    files = {mem: shm_dir / f"{mem}.bin" for mem in ("udma", "plddr")}
    for mem, path in files.items():
        with path.open("wb") as f:
            f.truncate(target(target_name).memory(mem).size)
    seed = int(os.environ.get("NPU_TEST_SEED", random.randrange(1 << 30)))
    print(f"NPU_TEST_SEED={seed}")
    run_cocotb(
        model,
        "test_npu_compute",
        test_dir=tmp_path,
        plusargs=[f"+npu_mem_{mem}={path}" for mem, path in files.items()],
        extra_env={
            "NPU_TARGET": target_name,
            "NPU_TEST_SEED": str(seed),
            **{f"NPU_MEM_{mem.upper()}": str(path) for mem, path in files.items()},
        },
        seed=seed,
    )


# ---------------------------------------------------------------------------- cocotb side
class Conv:
    """The layer, its int8 parameters, the packed engine data and the program."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.x = rng.integers(-128, 128, size=(1, C, H, W), dtype=np.int64).astype(np.int8)
        self.w = rng.integers(-128, 128, size=(C, C, 3, 3), dtype=np.int64).astype(np.int8)
        self.bias = rng.integers(-20000, 20000, size=C, dtype=np.int64).astype(np.int32)
        self.m = rng.integers(1 << 13, 1 << 15, size=C, dtype=np.int64)
        self.s = rng.integers(18, 24, size=C, dtype=np.int64)

    def reference(self) -> np.ndarray:
        op = type("Op", (), {})()
        op.attrs = {
            "strides": (1, 1),
            "pads": (1, 1, 1, 1),
            "dilations": (1, 1),
            "groups": 1,
            "lo": 0,
            "hi": 127,
        }
        op.op_type = "QConv2d"
        op.name = "conv"
        params = {"weight": self.w, "bias": self.bias, "multiplier": self.m, "shift": self.s}
        return qconv2d_forward(op, [self.x], params)[0]

    # Memory images (channel-tiled activations, packed weight blocks, ACC bias, PRM rows).
    def act_bytes(self) -> bytes:
        return self.x[0].reshape(G, B, H, W).transpose(0, 2, 3, 1).tobytes()  # (g, h, w, B)

    def wgt_bytes(self) -> bytes:
        blocks = self.w.reshape(G, B, G, B, 3, 3).transpose(0, 2, 4, 5, 1, 3)  # ob ib ky kx o i
        return np.ascontiguousarray(blocks).tobytes()

    def bias_bytes(self) -> bytes:
        return self.bias.tobytes()

    def prm_bytes(self) -> bytes:
        return ((self.s << 16) | (self.m & 0xFFFF)).astype(np.uint32).tobytes()

    @staticmethod
    def program() -> list:
        """BASE0 input, BASE1 weights, BASE2 bias, BASE3 PRM, BASE4 output."""
        ph, pw = H + 2, W + 2
        prog = [
            isa.Load(
                buffer=Buffer.INP,
                base=0,
                x_size=W,
                y_size=H,
                z_size=G,
                x_stride=B,
                y_stride=W * B,
                z_stride=H * W * B,
                pad_top=1,
                pad_bottom=1,
                pad_left=1,
                pad_right=1,
            ),
            isa.Load(
                buffer=Buffer.WGT, base=1, x_size=G * G * 9, y_size=1, z_size=1, x_stride=B * B
            ),
            isa.Load(
                buffer=Buffer.ACC, base=2, x_size=G, y_size=1, z_size=1, x_stride=4 * B, sram=1000
            ),
            isa.Load(
                buffer=Buffer.PRM,
                base=3,
                x_size=G,
                y_size=1,
                z_size=1,
                x_stride=4 * B,
                push_next=True,
            ),
        ]
        gemms = []
        for ob in range(G):
            for ib in range(G):
                for ky in range(3):
                    first = ib == 0 and ky == 0
                    gemms.append(
                        isa.Gemm(
                            init=GemmInit.BIAS if first else GemmInit.ACC,
                            acc=ob * H * W,
                            inp=ib * ph * pw + ky * pw,
                            wgt=((ob * G + ib) * 3 + ky) * 3,
                            bias=1000 + ob,
                            n0=W,
                            n1=H,
                            n2=3,
                            acc_s0=1,
                            inp_s0=1,
                            acc_s1=W,
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
                x_size=W,
                y_size=H,
                z_size=G,
                x_stride=B,
                y_stride=W * B,
                z_stride=H * W * B,
                sram_x_stride=1,
                sram_y_stride=W,
                sram_z_stride=H * W,
                lo=0,
                hi=127,
                pop_prev=True,
            ),
            isa.Finish(),
        ]


class Env:
    def __init__(self, dut) -> None:
        self.cfg = target(os.environ["NPU_TARGET"])
        self.h = NpuHarness(dut, CLOCK_PERIOD_PS)
        self.seed = int(os.environ["NPU_TEST_SEED"])
        self.rng = np.random.default_rng(self.seed)
        self.mem = {
            name: np.memmap(
                os.environ[f"NPU_MEM_{name.upper()}"],
                dtype=np.uint8,
                mode="r+",
                shape=(self.cfg.memory(name).size,),
            )
            for name in ("udma", "plddr")
        }

    def put(self, mem: str, offset: int, data: bytes) -> int:
        self.mem[mem][offset : offset + len(data)] = np.frombuffer(data, np.uint8)
        return self.cfg.memory(mem).base + offset

    def get(self, mem: str, offset: int, n: int) -> bytes:
        return bytes(self.mem[mem][offset : offset + n])


OFFSETS = {
    "prog": 0x0,
    "act": 0x1000,
    "wgt": 0x4000,
    "bias": 0x20000,
    "prm": 0x21000,
    "out": 0x30000,
}


async def stage_conv(env: Env, conv: Conv) -> dict[int, int]:
    """Program and tensors into plddr; returns the base registers."""
    datas = [conv.act_bytes(), conv.wgt_bytes(), conv.bias_bytes(), conv.prm_bytes()]
    bases = {}
    for reg, (name, data) in enumerate(zip(("act", "wgt", "bias", "prm"), datas, strict=True)):
        bases[reg] = env.put("plddr", OFFSETS[name], data)
    env.put("plddr", OFFSETS["out"], bytes(C * H * W))
    bases[4] = env.cfg.memory("plddr").base + OFFSETS["out"]
    env.put("plddr", OFFSETS["prog"], isa.encode_program(Conv.program()))
    return bases


def out_tensor(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, np.int8).reshape(G, H, W, B).transpose(0, 3, 1, 2).reshape(1, C, H, W)


@cocotb.test()
async def conv3x3_is_bit_exact(dut):
    env = Env(dut)
    await env.h.reset()
    conv = Conv(env.rng)
    bases = await stage_conv(env, conv)
    prog_addr = env.cfg.memory("plddr").base + OFFSETS["prog"]
    n = len(Conv.program())
    res = await run_program(env.h, env.cfg.npu_base, prog_addr, n, bases)
    assert res.ok, f"seed={env.seed}: {res}"
    got = out_tensor(env.get("plddr", OFFSETS["out"], C * H * W))
    want = conv.reference()
    assert np.array_equal(got, want), f"seed={env.seed}: conv output differs"
    p = res.perf
    assert p["GEMM_CYCLES"] == G * G * 9 * H * W
    assert p["COMPUTE_RETIRED"] == G * G * 3 and p["STORE_RETIRED"] == 1
    dut._log.info(
        "%s conv3x3 from plddr: %d cycles, MAC utilisation %.2f",
        env.cfg.name,
        p["RUN_CYCLES"],
        p["GEMM_CYCLES"] / p["RUN_CYCLES"],
    )

    if env.cfg.has_memory("ocm"):
        # The same program on tensors the DMA copied into the OCM (program stays in plddr).
        ocm = env.cfg.memory("ocm").base
        ocm_bases = {}
        for reg, name in enumerate(("act", "wgt", "bias", "prm")):
            size = {"act": C * H * W, "wgt": C * C * 9, "bias": 4 * C, "prm": 4 * C}[name]
            dst = ocm + OFFSETS[name]
            r = await run_dma(env.h, env.cfg.dma_base, DmaTransfer(bases[reg], dst, size))
            assert r.ok, f"DMA into the OCM: {r}"
            ocm_bases[reg] = dst
        ocm_bases[4] = ocm + OFFSETS["out"]
        res2 = await run_program(env.h, env.cfg.npu_base, prog_addr, n, ocm_bases)
        assert res2.ok, f"seed={env.seed}: {res2}"
        r = await run_dma(
            env.h,
            env.cfg.dma_base,
            DmaTransfer(ocm_bases[4], env.cfg.memory("udma").base, C * H * W),
        )
        assert r.ok
        assert np.array_equal(out_tensor(env.get("udma", 0, C * H * W)), want)
        dut._log.info(
            "zg330 conv3x3 from the OCM: %d cycles (plddr: %d)",
            res2.perf["RUN_CYCLES"],
            p["RUN_CYCLES"],
        )
        assert res2.perf["RUN_CYCLES"] < p["RUN_CYCLES"], "the OCM is not faster than DDR"


@cocotb.test()
async def bus_error_then_a_correct_program(dut):
    env = Env(dut)
    await env.h.reset()
    conv = Conv(env.rng)
    bases = await stage_conv(env, conv)
    prog_addr = env.cfg.memory("plddr").base + OFFSETS["prog"]
    n = len(Conv.program())
    env.h.set_fault("plddr", OFFSETS["wgt"] + 512, 16, AxiResp.DECERR)
    res = await run_program(env.h, env.cfg.npu_base, prog_addr, n, bases)
    env.h.clear_fault()
    assert res.outcome.name == "IRQ" and res.err_code == 5, f"want LOAD_DECERR: {res}"
    assert (res.err_pc, res.err_unit) == (1, 0), res
    assert res.err_addr == bases[1]  # the burst holding the faulty beat
    res = await run_program(env.h, env.cfg.npu_base, prog_addr, n, bases)
    assert res.ok, res
    got = out_tensor(env.get("plddr", OFFSETS["out"], C * H * W))
    assert np.array_equal(got, conv.reference())
