"""Programs that check no data outlives the engine's buffers (tests/integration's lease
isolation test, tests/rtl/test_compute_block.py's wipe test; one source for both).

`secret_program` fills the first and last rows of every buffer (INP, WGT, ACC, PRM, LUT)
with random data. `reader_program` loads nothing into those rows and reads them out the
ways an attacker would: STOREs the ACC rows, moves INP rows out through ACC, recovers WGT
blocks with one-hot GEMMs, requantizes known values with the PRM rows, and looks up every
input value in the first and last tables. Run on a fresh engine (all buffers zero) and on
the engine as the secret program left it, every probe of the reader gives other bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xrt.hw import isa
from xrt.hw.config import NpuConfig
from xrt.hw.isa import Buffer, GemmInit, StoreMode, Unit, VecFunc

__all__ = ["EDGE", "Probe", "reader_program", "secret_program"]

EDGE = 4  # rows probed at each end of every buffer


def _rows(cfg: NpuConfig) -> dict[Buffer, int]:
    return {
        Buffer.INP: cfg.inp_rows,
        Buffer.WGT: cfg.wgt_rows,
        Buffer.ACC: cfg.acc_rows,
        Buffer.PRM: cfg.prm_rows,
        Buffer.LUT: cfg.lut_tables * 256 // cfg.block,
    }


def _edges(cfg: NpuConfig, buf: Buffer) -> tuple[int, int]:
    """The first row of each probed run of rows: the buffer's start and its end."""
    return 0, _rows(cfg)[buf] - EDGE


def secret_program(cfg: NpuConfig, seed: int = 2028) -> tuple[list[isa.Instruction], bytes]:
    """LOADs of random rows into both ends of every buffer (base 0: the data they read)."""
    rng = np.random.default_rng(seed)
    prog: list[isa.Instruction] = []
    data = bytearray()
    for buf in _rows(cfg):
        rb = cfg.row_bytes(buf.name)
        for first in _edges(cfg, buf):
            rows = rng.integers(0, 256, size=EDGE * rb, dtype=np.uint8)
            if buf == Buffer.PRM:  # a legal {S, M} word in every lane: S 20, M random
                words = rows.view("<u4") & np.uint32(0xFFFF)
                rows = (words | np.uint32(20 << 16)).view(np.uint8)
            prog.append(
                isa.Load(
                    buffer=buf,
                    base=0,
                    sram=first,
                    offset=len(data),
                    x_size=EDGE,
                    y_size=1,
                    z_size=1,
                    x_stride=rb,
                )
            )
            data += rows.tobytes()
    prog.append(isa.Finish())
    return prog, bytes(data)


@dataclass(frozen=True)
class Probe:
    """One read-out of the reader: what it shows and where its bytes land (base 1)."""

    what: str
    offset: int
    nbytes: int


def reader_program(cfg: NpuConfig) -> tuple[list[isa.Instruction], bytes, list[Probe]]:
    """The reader (base 0: its data, base 1: its output), its data and its probes. Its own
    rows (scratch) lie between the probed ends of each buffer."""
    b = cfg.block
    rows = _rows(cfg)
    prog: list[isa.Instruction] = []
    probes: list[Probe] = []
    data = bytearray()
    out = 0
    free = {Buffer.INP: 2 * EDGE, Buffer.ACC: 2 * EDGE}  # next scratch row

    def scratch(buf: Buffer, n: int) -> int:
        first = free[buf]
        free[buf] += n
        assert free[buf] <= rows[buf] - EDGE, f"{buf.name}: too few rows for the reader"
        return first

    def store(what: str, sram: int, n: int, *, pop: bool, **kw: object) -> None:
        nonlocal out
        mode = kw.pop("mode", StoreMode.INT32)
        nbytes = n * b * (4 if mode == StoreMode.INT32 else 1)
        prog.append(
            isa.Store(
                mode=mode,
                base=1,
                sram=sram,
                offset=out,
                x_size=n,
                y_size=1,
                z_size=1,
                x_stride=nbytes // n,
                sram_x_stride=1,
                pop_prev=pop,
                **kw,
            )
        )
        probes.append(Probe(what, out, nbytes))
        out += nbytes

    def load(buf: Buffer, raw: bytes) -> int:
        rb = cfg.row_bytes(buf.name)
        sram = scratch(buf, len(raw) // rb)
        prog.append(
            isa.Load(
                buffer=buf,
                base=0,
                sram=sram,
                offset=len(data),
                x_size=len(raw) // rb,
                y_size=1,
                z_size=1,
                x_stride=rb,
                push_next=True,
            )
        )
        data.extend(raw)
        return sram

    # ACC: straight out.
    for first in _edges(cfg, Buffer.ACC):
        store(f"ACC rows {first}..{first + EDGE - 1}", first, EDGE, pop=False)
    # INP: moved into scratch ACC rows by the vector unit, then out.
    for first in _edges(cfg, Buffer.INP):
        dst = scratch(Buffer.ACC, EDGE)
        prog.append(
            isa.Vec(
                func=VecFunc.MOV, dst=dst, a=first, n0=EDGE, n1=1, dst_s0=1, a_s0=1, push_next=True
            )
        )
        store(f"INP rows {first}..{first + EDGE - 1}", dst, EDGE, pop=True)
    # WGT: one-hot inputs (identity rows) times a weight block give the block itself.
    onehot = load(Buffer.INP, np.eye(b, dtype=np.int8).tobytes())
    for k, block in enumerate((0, rows[Buffer.WGT] - 1)):
        dst = scratch(Buffer.ACC, b)
        prog.append(
            isa.Gemm(
                init=GemmInit.ZERO,
                acc=dst,
                inp=onehot,
                wgt=block,
                n0=b,
                n1=1,
                n2=1,
                acc_s0=1,
                inp_s0=1,
                pop_prev=k == 0,
                push_next=True,
            )
        )
        store(f"WGT block {block}", dst, b, pop=True)
    # PRM: known accumulators requantized with the PRM rows' M and S.
    known = load(Buffer.ACC, (np.arange(EDGE * b, dtype="<i4") * 4099 + (1 << 20)).tobytes())
    prog.append(isa.Sync(unit=Unit.COMPUTE, pop_prev=True, push_next=True))
    for k, row in enumerate((0, rows[Buffer.PRM] - 1)):
        store(
            f"PRM row {row}",
            known,
            EDGE,
            pop=k == 0,
            mode=StoreMode.INT8,
            use_prm=True,
            m_or_prm=row,
            lo=-128,
            hi=127,
        )
    # LUT: every input value through the first and the last table.
    values = load(Buffer.INP, np.arange(256, dtype=np.uint8).tobytes())
    for k, table in enumerate((0, cfg.lut_tables - 1)):
        dst = scratch(Buffer.ACC, 256 // b)
        prog.append(
            isa.Vec(
                func=VecFunc.LUT,
                dst=dst,
                a=values,
                b=table,
                n0=256 // b,
                n1=1,
                dst_s0=1,
                a_s0=1,
                pop_prev=k == 0,
                push_next=True,
            )
        )
        store(f"LUT table {table}", dst, 256 // b, pop=True)
    prog.append(isa.Finish())
    return prog, bytes(data), probes
