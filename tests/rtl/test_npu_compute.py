"""The compute engine inside the whole NPU (`npu_sim`) of each target, through the harness.

A 3x3 convolution (32 -> 32 channels, 8x8, padding 1, bias, per-channel requantization,
ReLU bounds) compiled by hand into a double-buffered engine program (`npu_programs`) runs
bit-exact against xrt's QConv2d kernel, launched with the driver sequence of docs/isa.md
(registers from the generated map). Real layers compiled by `xrt.npu.compiler` (a conv, a
depthwise conv, a residual add, max and average pooling) run bit-exact against the host
kernels. The program and tensors sit in plddr; on ZG330 the same program runs again on
tensors the DMA placed in the OCM, which the engine reaches faster than DDR. A bus error
(DECERR injected in plddr) ends a program with its code and one interrupt, and the next
program is correct. The DMA shares the memories through the same interconnect.
"""

from __future__ import annotations

import itertools
import os
import random

import cocotb
import numpy as np
import pytest
from cocotbext.axi import AxiResp
from npu_programs import HandConv, place_compiled, read_outputs, real_layers

from npuemu.sim.cocotb_run import run_cocotb
from npuemu.sim.core_driver import run_program
from npuemu.sim.dma_driver import DmaTransfer, program_ops, run_dma
from npuemu.sim.harness import NpuHarness
from xrt.hw import isa
from xrt.hw.isa import Buffer, StoreMode
from xrt.hw.regs import DMA
from xrt.hw.targets import CLOCK_PERIOD_PS, NPU, target
from xrt.network import run_network_reference
from xrt.npu.compiler import compile_run

B = 16
C, H, W = 32, 8, 8  # channels in and out, height, width


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
def hand_conv(rng: np.random.Generator) -> HandConv:
    """The hand-compiled 3x3 conv (32 -> 32 channels, 8x8, ReLU bounds), two row tiles."""
    return HandConv(C, H, W, 3, th=4, lo=0, hi=127, seed=int(rng.integers(1 << 30)))


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


async def stage_conv(env: Env, conv: HandConv) -> tuple[dict[str, int], dict[int, int]]:
    """Program and tensors into plddr; returns their offsets and the base registers."""
    offsets = conv.layout()
    env.put("plddr", offsets["prog"], isa.encode_program(conv.program()))
    for name, data in conv.images().items():
        env.put("plddr", offsets[name], data)
    bases = {r: env.cfg.memory("plddr").base + offsets[n] for r, n in enumerate(conv.ROLES)}
    return offsets, bases


@cocotb.test()
async def conv3x3_is_bit_exact(dut):
    env = Env(dut)
    await env.h.reset()
    conv = hand_conv(env.rng)
    offsets, bases = await stage_conv(env, conv)
    prog = conv.program()
    plddr = env.cfg.memory("plddr").base
    res = await run_program(env.h, env.cfg.npu_base, plddr + offsets["prog"], len(prog), bases)
    assert res.ok, f"seed={env.seed}: {res}"
    nbytes = C * H * W
    got = conv.out_tensor(env.get("plddr", offsets["out"], nbytes))
    want = conv.reference()
    assert np.array_equal(got, want), f"seed={env.seed}: conv output differs"
    p = res.perf
    assert p["GEMM_CYCLES"] == conv.gemm_cycles
    assert p["COMPUTE_RETIRED"] == sum(isinstance(i, isa.Gemm) for i in prog)
    assert p["STORE_RETIRED"] == sum(isinstance(i, isa.Store) for i in prog)
    dut._log.info(
        "%s conv3x3 from plddr: %d cycles, MAC utilisation %.2f",
        env.cfg.name,
        p["RUN_CYCLES"],
        p["GEMM_CYCLES"] / p["RUN_CYCLES"],
    )

    if env.cfg.has_memory("ocm"):
        # The same program and tensors, copied by the DMA into the OCM.
        ocm = env.cfg.memory("ocm").base
        sizes = {"prog": isa.INSN_BYTES * len(prog)}
        sizes.update((name, len(data)) for name, data in conv.images().items())
        for name, size in sizes.items():
            r = await run_dma(
                env.h,
                env.cfg.dma_base,
                DmaTransfer(plddr + offsets[name], ocm + offsets[name], size),
            )
            assert r.ok, f"DMA into the OCM: {r}"
        ocm_bases = {reg: ocm + offsets[name] for reg, name in enumerate(conv.ROLES)}
        res2 = await run_program(
            env.h, env.cfg.npu_base, ocm + offsets["prog"], len(prog), ocm_bases
        )
        assert res2.ok, f"seed={env.seed}: {res2}"
        r = await run_dma(
            env.h, env.cfg.dma_base, DmaTransfer(ocm_bases[4], env.cfg.memory("udma").base, nbytes)
        )
        assert r.ok
        assert np.array_equal(conv.out_tensor(env.get("udma", 0, nbytes)), want)
        dut._log.info(
            "zg330 conv3x3 from the OCM: %d cycles (plddr: %d)",
            res2.perf["RUN_CYCLES"],
            p["RUN_CYCLES"],
        )


@cocotb.test()
async def compiled_layers_are_bit_exact(dut):
    """Real layers compiled by `xrt.npu.compiler` (a conv, a depthwise conv, a residual add,
    max and average pooling, concatenation, channel shuffle, flatten) run on the engine
    bit-exact against the host kernels, and the engine counts the GEMM cycles the program
    holds."""
    env = Env(dut)
    await env.h.reset()
    plddr = env.cfg.memory("plddr").base
    start = 0x400000  # clear of what the other tests place
    for name, net, feeds in real_layers(env.rng):
        prog = compile_run(net, NPU)
        images, offsets, _ = place_compiled(prog, feeds, start)
        for off, data in images.items():
            env.put("plddr", off, data)
        bases = {r: plddr + off for r, off in offsets.items()}
        n = len(prog.instructions)
        res = await run_program(env.h, env.cfg.npu_base, plddr + start, n, bases)
        assert res.ok, f"seed={env.seed} {name}: {res}\n{prog.report()}"
        got = read_outputs(prog, offsets, lambda off, k: env.get("plddr", off, k))
        want = run_network_reference(net, dict(feeds))
        for out, ref in zip(net.outputs, want, strict=True):
            assert np.array_equal(got[out], ref), f"seed={env.seed}: {name} differs"
        gemm = sum(i.n0 * i.n1 * i.n2 for i in prog.instructions if isinstance(i, isa.Gemm))
        assert res.perf["GEMM_CYCLES"] == gemm, f"{name}: {res.perf}"
        dut._log.info(
            "%s %s: %d instructions, %d cycles (GEMM %d)",
            env.cfg.name, name, n, res.perf["RUN_CYCLES"], gemm,
        )  # fmt: skip


@cocotb.test()
async def on_chip_memory_is_faster(dut):
    """A memory-bound program (a stride-2 subsampling LOAD: one burst per pixel, then a
    STORE) takes fewer cycles on tensors in the OCM than in DDR (ZG330), because the DDR
    models answer after `ddr_latency` cycles."""
    env = Env(dut)
    await env.h.reset()
    if not env.cfg.has_memory("ocm"):
        return
    x = env.rng.integers(-128, 128, size=(16, 16, B), dtype=np.int64).astype(np.int8)
    prog = [
        isa.Load(
            buffer=Buffer.INP,
            base=0,
            x_size=8,
            y_size=8,
            z_size=1,
            x_stride=2 * B,
            y_stride=2 * 16 * B,
            push_next=True,
        ),
        isa.Vec(
            func=isa.VecFunc.MOV,
            dst=0,
            a=0,
            n0=64,
            n1=1,
            dst_s0=1,
            a_s0=1,
            pop_prev=True,
            push_next=True,
        ),
        isa.Store(
            mode=StoreMode.INT32,
            base=1,
            x_size=64,
            y_size=1,
            z_size=1,
            x_stride=4 * B,
            sram_x_stride=1,
            lo=-128,
            hi=127,
            pop_prev=True,
        ),
        isa.Finish(),
    ]
    blob = isa.encode_program(prog)
    want = x[::2, ::2].reshape(64, B).astype(np.int32)
    cycles = {}
    for mem in ("plddr", "ocm"):
        base = env.cfg.memory(mem).base
        if mem == "plddr":
            env.put("plddr", 0x50000, blob)
            env.put("plddr", 0x51000, x.tobytes())
        else:
            for off, size in ((0x50000, len(blob)), (0x51000, x.nbytes)):
                src = env.cfg.memory("plddr").base + off
                r = await run_dma(env.h, env.cfg.dma_base, DmaTransfer(src, base + off, size))
                assert r.ok
        res = await run_program(
            env.h,
            env.cfg.npu_base,
            base + 0x50000,
            len(prog),
            {0: base + 0x51000, 1: base + 0x58000},
        )
        assert res.ok, f"{mem}: {res}"
        r = await run_dma(
            env.h,
            env.cfg.dma_base,
            DmaTransfer(base + 0x58000, env.cfg.memory("udma").base, want.nbytes),
        )
        assert r.ok
        got = np.frombuffer(env.get("udma", 0, want.nbytes), np.int32).reshape(64, B)
        assert np.array_equal(got, want), f"{mem}: subsampled tensor differs"
        cycles[mem] = res.perf["RUN_CYCLES"]
    dut._log.info(
        "memory-bound program: %d cycles from plddr, %d from the OCM",
        cycles["plddr"],
        cycles["ocm"],
    )
    assert cycles["ocm"] < cycles["plddr"], f"the OCM is not faster than DDR: {cycles}"


@cocotb.test()
async def bus_error_then_a_correct_program(dut):
    env = Env(dut)
    await env.h.reset()
    conv = hand_conv(env.rng)
    offsets, bases = await stage_conv(env, conv)
    prog = conv.program()
    prog_addr = env.cfg.memory("plddr").base + offsets["prog"]
    n = len(prog)
    env.h.set_fault("plddr", offsets["wgt"] + 512, 16, AxiResp.DECERR)
    res = await run_program(env.h, env.cfg.npu_base, prog_addr, n, bases)
    env.h.clear_fault()
    assert res.wait.name == "INTERRUPT" and res.err_code == 5, f"want LOAD_DECERR: {res}"
    first_wgt = next(
        i for i, insn in enumerate(prog) if isinstance(insn, isa.Load) and insn.buffer == Buffer.WGT
    )
    assert (res.err_pc, res.err_unit) == (first_wgt, 0), res
    assert res.err_addr == bases[1]  # the burst holding the faulty beat
    res = await run_program(env.h, env.cfg.npu_base, prog_addr, n, bases)
    assert res.ok, res
    got = conv.out_tensor(env.get("plddr", offsets["out"], C * H * W))
    assert np.array_equal(got, conv.reference())


@cocotb.test()
async def dma_and_engine_share_the_memories(dut):
    """A long DMA copy runs while the engine runs the conv: the AXI mux interleaves both
    masters' bursts (reads and writes) and both results are exact."""
    env = Env(dut)
    await env.h.reset()
    conv = hand_conv(env.rng)
    offsets, bases = await stage_conv(env, conv)
    prog_addr = env.cfg.memory("plddr").base + offsets["prog"]
    n = len(conv.program())
    nbytes = 1024 * 1024
    src = env.rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    env.put("udma", 0x100000, src)
    env.put("plddr", 0x200000, bytes(nbytes))
    udma, plddr = env.cfg.memory("udma").base, env.cfg.memory("plddr").base
    ops = program_ops(env.cfg.dma_base, DmaTransfer(udma + 0x100000, plddr + 0x200000, nbytes))
    enable = env.cfg.dma_base + DMA.register("INT_ENABLE").offset
    ops = [op for op in ops if op.addr != enable]  # the interrupt line is the engine's here
    await env.h.run_batch(ops)
    res = await run_program(env.h, env.cfg.npu_base, prog_addr, n, bases)
    assert res.ok, f"seed={env.seed}: {res}"
    dut._log.info("conv beside a DMA copy: %d cycles", res.perf["RUN_CYCLES"])
    status = await env.h.read_reg(env.cfg.dma_base + DMA.register("STATUS").offset)
    assert status & 1, "the DMA copy ended before the engine: no overlap was tested"
    w = await env.h.poll(env.cfg.dma_base + DMA.register("STATUS").offset, 1, 0, 1_000_000)
    assert (w >> 8) & 0xF == 0, f"DMA error {w:#x}"
    assert env.get("plddr", 0x200000, nbytes) == src, "the DMA copy differs"
    got = conv.out_tensor(env.get("plddr", offsets["out"], C * H * W))
    assert np.array_equal(got, conv.reference()), f"seed={env.seed}: conv output differs"


@cocotb.test()
async def far_offsets_strides_and_rows_move_the_right_bytes(dut):
    """LOAD and STORE with the widest legal reach: offsets above 2^31 (a base in udma, the
    tensor in plddr), strides with every bit from 4 to 27 set somewhere (0x0AAA_AAA0,
    0x0555_5550, 0x0FFF_FFF0), accumulator rows across the whole buffer (0, 0x555, 0xAAA,
    0xFFF, 0x800..) and accumulator-row strides of 0x555 and 0xAAA: the int32 rows land
    exactly where the ISA says. (Closes the toggle coverage of the units' address fields:
    docs/verification.md.)"""
    env = Env(dut)
    await env.h.reset()
    udma, plddr = env.cfg.memory("udma"), env.cfg.memory("plddr")
    b = NPU.block
    row = 4 * b  # bytes of one accumulator row in memory (INT32)
    far = plddr.base - udma.base  # an offset from a udma base that reaches plddr
    y1, z1, y2, z2 = 0x0AAA_AAA0, 0x0555_5550, 0x0555_5550, 0x0AAA_AAA0
    src_a, dst_a = 0x40, 0x2040  # plddr offsets of part A's tensors
    src_b, dst_b = 0x1AAA_AA00, 0x1555_5540  # part B's
    singles = (0x000, 0x555, 0xAAA, 0xFFF)  # accumulator rows of part B
    rows_a = 0x800
    rng = env.rng
    a_vals = rng.integers(-(1 << 31), 1 << 31, size=(2, 2, b), dtype=np.int64).astype(np.int32)
    b_vals = rng.integers(-(1 << 31), 1 << 31, size=(4, b), dtype=np.int64).astype(np.int32)
    a_src = {(z, y): src_a + z * z1 + y * y1 for z in range(2) for y in range(2)}
    a_dst = {(z, y): dst_a + z * z2 + y * y2 for z in range(2) for y in range(2)}
    b_dst = {(z, y): dst_b + z * 2 * row + y * row for z in range(2) for y in range(2)}
    # part C: offsets and x strides with alternating bits, accumulator-row x strides
    xs1, xs2, xs3, xs4 = 0xAAA0, 0x5550, 0x5550, 0xFFF0
    src_c = (0x0555_5540, 0x0AAA_AA80)
    c_src = [src_c[0], src_c[0] + xs1, src_c[1], src_c[1] + xs2]  # rows 0x804..0x807
    dst_c, dst_d = 0x0FFE_0000, 0x0F0F_0000
    c_dst = {(y, x): dst_c + y * 0x10000 + x * xs3 for y in range(2) for x in range(2)}
    d_dst = [dst_d, dst_d + xs4]  # rows 0 and 0xFFF
    c_vals = rng.integers(-(1 << 31), 1 << 31, size=(4, b), dtype=np.int64).astype(np.int32)
    spots = [*a_src.values(), *a_dst.values(), *b_dst.values(), *c_src, *c_dst.values()]
    spots += [src_b + i * row for i in range(4)] + d_dst
    spots.sort()
    assert spots[-1] + row <= plddr.size and all(b - a >= row for a, b in itertools.pairwise(spots))
    for (z, y), off in a_src.items():
        env.put("plddr", off, a_vals[z, y].tobytes())
    for i in range(4):
        env.put("plddr", src_b + i * row, b_vals[i].tobytes())
    for i, off in enumerate(c_src):
        env.put("plddr", off, c_vals[i].tobytes())
    for off in [*a_dst.values(), *b_dst.values(), *c_dst.values(), *d_dst]:
        env.put("plddr", off, bytes(row))
    acc = Buffer.ACC
    prog = [
        isa.Load(buffer=acc, base=0, offset=far + src_a, sram=rows_a, x_size=1, y_size=2,
                 z_size=2, x_stride=row, y_stride=y1, z_stride=z1),
        *[
            isa.Load(buffer=acc, base=2, offset=i * row, sram=r, x_size=1, y_size=1, z_size=1,
                     x_stride=row)
            for i, r in enumerate(singles)
        ],
        isa.Load(buffer=acc, base=3, offset=src_c[0], sram=0x804, x_size=2, y_size=1,
                 z_size=1, x_stride=xs1),
        isa.Load(buffer=acc, base=3, offset=src_c[1], sram=0x806, x_size=2, y_size=1,
                 z_size=1, x_stride=xs2, push_next=True),
        isa.Sync(unit=isa.Unit.COMPUTE, pop_prev=True, push_next=True),
        isa.Store(mode=StoreMode.INT32, base=1, offset=far + dst_a, sram=rows_a, x_size=1,
                  y_size=2, z_size=2, x_stride=row, y_stride=y2, z_stride=z2, sram_x_stride=1,
                  sram_y_stride=1, sram_z_stride=2, lo=-128, hi=127, pop_prev=True),
        isa.Store(mode=StoreMode.INT32, base=3, offset=dst_b, sram=0, x_size=1,
                  y_size=2, z_size=2, x_stride=row, y_stride=row, z_stride=2 * row,
                  sram_x_stride=1, sram_y_stride=0x555, sram_z_stride=0xAAA, lo=-128, hi=127),
        isa.Store(mode=StoreMode.INT32, base=3, offset=dst_c, sram=0x804, x_size=2, y_size=2,
                  z_size=1, x_stride=xs3, y_stride=0x10000, sram_x_stride=1, sram_y_stride=2,
                  lo=-128, hi=127),
        isa.Store(mode=StoreMode.INT32, base=3, offset=dst_d, sram=0, x_size=2, y_size=1,
                  z_size=1, x_stride=xs4, sram_x_stride=0xFFF, lo=-128, hi=127),
        isa.Finish(),
    ]  # fmt: skip
    prog_off = 0x3000
    prog_addr = env.put("plddr", prog_off, isa.encode_program(prog))
    bases = {0: udma.base, 1: udma.base, 2: plddr.base + src_b, 3: plddr.base}
    res = await run_program(env.h, env.cfg.npu_base, prog_addr, len(prog), bases)
    assert res.ok, res
    for (z, y), off in a_dst.items():
        got = np.frombuffer(env.get("plddr", off, row), np.int32)
        assert np.array_equal(got, a_vals[z, y]), f"part A row z={z} y={y} at {off:#x}"
    for (z, y), off in b_dst.items():
        got = np.frombuffer(env.get("plddr", off, row), np.int32)
        want = b_vals[singles.index(z * 0xAAA + y * 0x555)]
        assert np.array_equal(got, want), f"part B row z={z} y={y} at {off:#x}"
    for (y, x), off in c_dst.items():
        got = np.frombuffer(env.get("plddr", off, row), np.int32)
        assert np.array_equal(got, c_vals[2 * y + x]), f"part C row y={y} x={x} at {off:#x}"
    for x, off in enumerate(d_dst):
        got = np.frombuffer(env.get("plddr", off, row), np.int32)
        assert np.array_equal(got, b_vals[3 * x]), f"part D row x={x} at {off:#x}"
