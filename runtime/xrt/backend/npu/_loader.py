"""Compiled programs in an NPU device's memories: where a program's code, constants,
input and output buffers and scratch go, the on-chip arena the programs prepared together
share, whether the engine can store an output straight into a caller's tensor, and reading
a launched program's intermediates back.

`ProgramLoader` serves one device (the backend makes it when it is bound to one);
`LoadedProgram` is a program it uploaded, with the addresses it launches with. On ZG330 the
OCM comes first wherever it has room (`ProgramLoader._home` says why), ``plddr`` otherwise;
Buyi has only ``plddr``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from xrt.backend.npu._timeline import LaunchSchedule
from xrt.device import Device, HostDevice
from xrt.dtypes import TensorType
from xrt.errors import XrtError
from xrt.layout import ChannelTiled
from xrt.memory import MemChunk, MemRegion
from xrt.npu.compiler import NpuProgram, as_nchw, from_tiled
from xrt.tensor import Tensor

__all__ = ["PROGRAM_ALIGN", "LoadedProgram", "ProgramLoader"]

PROGRAM_ALIGN = 4096
"""Alignment of every chunk a program gets (code, constants, buffers, scratch)."""


@dataclass
class LoadedProgram:
    """A program uploaded to the device, with its buffers (compile-only: `unloaded`)."""

    program: NpuProgram
    chunks: list[MemChunk]
    prog_addr: int
    bases: dict[int, int]
    buffers: dict[str, MemChunk]  # input/output value -> its device buffer
    placement: dict[str, str] = field(default_factory=dict)  # role -> region name
    schedule: LaunchSchedule | None = None  # the cost model's, computed when first traced

    @classmethod
    def unloaded(cls, program: NpuProgram) -> LoadedProgram:
        """A program compiled without a device (``xrt compile``): recorded, not uploaded."""
        return cls(program, [], 0, {}, {})

    def free(self) -> None:
        """Free the program's chunks (those the device has not freed already)."""
        for chunk in self.chunks:
            if not chunk.is_freed:
                chunk.free()

    def read_stored(
        self, device: Device, types: Mapping[str, TensorType], skip: Iterable[str] = ()
    ) -> list[tuple[str, Tensor]]:
        """The program's outputs (in its own buffers: not those in `skip`) and readable
        intermediates as the engine stored them (`stored_tensor`), read from the device."""
        prog, out = self.program, []
        for b in prog.outputs:
            if b.name not in skip and b.name in types:
                raw = np.frombuffer(self.buffers[b.name].tobytes(0, b.nbytes), np.uint8)
                out.append((b.name, stored_tensor(types[b.name], raw, prog.block)))
        for p in prog.intermediates:
            if p.readable_after and "#" not in p.name and p.name in types:
                region = device.get_mem_region(self.placement[f"intermediate:{p.name}"])
                raw = np.empty(p.nbytes, np.uint8)
                region.read(raw, self.bases[p.base] + p.offset, p.nbytes)
                out.append((p.name, stored_tensor(types[p.name], raw, prog.block)))
        return [(name, t) for name, t in out if t is not None]

    def read_intermediates(self, device: Device) -> list[tuple[str, np.ndarray]]:
        """The intermediates whose bytes still hold them after the program ran
        (`TensorPlacement.readable_after`), read back from where they live on `device`."""
        prog = self.program
        out: list[tuple[str, np.ndarray]] = []
        for p in prog.intermediates:
            if not p.readable_after or "#" in p.name:
                continue
            region = device.get_mem_region(self.placement[f"intermediate:{p.name}"])
            raw = np.empty(p.nbytes, np.uint8)
            region.read(raw, self.bases[p.base] + p.offset, p.nbytes)
            out.append((p.name, from_tiled(raw, p.shape, prog.block)))
        return out


def stored_tensor(ttype: TensorType, raw: np.ndarray, block: int) -> Tensor | None:
    """A host tensor of type `ttype` holding `raw`, the engine's bytes of a value (channel
    tiles of `block` over NCHW), in that hardware layout; None when the value's declared
    layout is not one the engine's tiling describes. A value of no declared layout (``*``)
    is in the engine's: NCHW (NC for two dimensions)."""
    hw = ChannelTiled(block)
    if ttype.layout == "*" and len(ttype.shape) in (2, 4):
        layout = "NCHW" if len(ttype.shape) == 4 else "NC"
        ttype = TensorType(ttype.dtype, ttype.shape, layout, ttype.quant)
    if ttype.layout not in ("NCHW", "NC") or hw.storage_bytes(ttype) != raw.nbytes:
        return None
    t = Tensor(ttype, hw_layout=hw).malloc_on(HostDevice.default_region())
    t.write(raw)
    return t


class ProgramLoader:
    """Uploads compiled programs into one device's memories (see the module docstring).

    Args:
        device: The NPU device.
        ocm_region: The name of its on-chip memory region (None: it has none).
    """

    def __init__(self, device: Device, ocm_region: str | None) -> None:
        self.device = device
        self._device = device
        self._ocm_region = ocm_region
        self._ocm_arena: MemChunk | None = None
        self._arena_in_use = False

    def release(self) -> None:
        """Free the on-chip arena (the programs' own chunks are `LoadedProgram.free`'s)."""
        if self._ocm_arena is not None and not self._ocm_arena.is_freed:
            self._ocm_arena.free()
        self._ocm_arena = None
        self._arena_in_use = False

    def reserve_ocm(self, size: int) -> None:
        """Make the shared on-chip arena at least `size` bytes when the OCM has room."""
        if size <= 0 or self._ocm_region is None:
            return
        arena = self._ocm_arena
        if arena is not None and not arena.is_freed and arena.size >= size:
            return
        if self._arena_in_use:
            return  # programs already point at the arena: later ones get their own chunks
        ocm = self._device.get_mem_region(self._ocm_region)
        if arena is not None and not arena.is_freed:
            arena.free()
        self._ocm_arena = None
        if ocm.mem_manager.largest_free_block >= size:
            self._ocm_arena = ocm.malloc(size, True, PROGRAM_ALIGN)

    def _alloc_ocm(self, size: int, chunks: list[MemChunk]) -> tuple[int, str]:
        """Address and region of a program's on-chip scratch.

        Programs run one at a time and their intermediates are dead when they finish, so
        the programs prepared together share one arena (`reserve_ocm`). A program that
        needs more (prepared later, e.g. by ``step_to``) gets its own chunk in what is left
        of the OCM, else external memory (same bytes, same program: only slower).
        """
        ocm = self._device.get_mem_region(self._ocm_region or "ocm")
        arena = self._ocm_arena
        if arena is not None and not arena.is_freed and arena.size >= size:
            self._arena_in_use = True
            return arena.begin.addr, ocm.name
        region = ocm
        if ocm.mem_manager.largest_free_block < size + PROGRAM_ALIGN:
            region = self._device.get_mem_region("plddr")
        chunk = region.malloc(max(size, 1), True, PROGRAM_ALIGN)
        chunks.append(chunk)
        return chunk.begin.addr, region.name

    def _home(self, size: int) -> MemRegion:
        """Where a program's code and constants, or an input or output buffer, go: the OCM
        when what is left of it after the intermediates' arena holds `size`, else plddr.

        The engine reaches every memory through one AXI demux that lets bursts to one
        memory finish before it starts one to another, so a program reading its weights
        from plddr and its activations from the OCM pays the DDR latency at every switch;
        with everything on chip it never does.
        """
        if self._ocm_region is not None:
            ocm = self._device.get_mem_region(self._ocm_region)
            if ocm.mem_manager.largest_free_block >= size + PROGRAM_ALIGN:
                return ocm
        return self._device.get_mem_region("plddr")

    def load(self, prog: NpuProgram) -> LoadedProgram:
        """Upload `prog`: its code and constants, a buffer for each input and output, its
        scratch; returns where everything went."""
        plddr = self._device.get_mem_region("plddr")
        chunks: list[MemChunk] = []

        def alloc(region: MemRegion, size: int) -> MemChunk:
            chunk = region.malloc(max(size, 1), True, PROGRAM_ALIGN)
            chunks.append(chunk)
            return chunk

        code = prog.encode()
        # Constants follow the code at a 64-byte boundary (chunks are page aligned), in one
        # allocation when both fit where they go; on chip the code alone may (it is read all
        # through the run), the constants then go to plddr.
        const_off = -(-len(code) // 64) * 64
        prog_bytes = const_off + len(prog.constants)
        home = self._home(prog_bytes)
        if home.name == "plddr" and self._home(len(code)).name != "plddr":
            prog_chunk = alloc(self._home(len(code)), len(code))
            prog_chunk.write(code)
            const_chunk = alloc(plddr, len(prog.constants))
            if prog.constants:
                const_chunk.write(prog.constants)
            const_addr = const_chunk.begin.addr
        else:
            prog_chunk = alloc(home, prog_bytes)
            prog_chunk.write(code)
            if prog.constants:
                prog_chunk.write(prog.constants, offset=const_off)
            const_addr = prog_chunk.begin.addr + const_off
        bases: dict[int, int] = {}
        buffers: dict[str, MemChunk] = {}
        placement: dict[str, str] = {}
        regions: dict[int, str] = {}
        for role in prog.bases:
            if role.kind == "const":
                bases[role.index] = const_addr
                placement["code"] = prog_chunk.region.name
                placement["constants"] = (
                    next(c.region.name for c in chunks if c.begin.addr <= const_addr < c.end.addr)
                    if prog.constants
                    else prog_chunk.region.name
                )
            elif role.kind == "scratch":
                bases[role.index] = alloc(plddr, role.size).begin.addr
                placement["scratch"] = regions[role.index] = "plddr"
            elif role.kind == "ocm":
                bases[role.index], where = self._alloc_ocm(role.size, chunks)
                placement["ocm"] = regions[role.index] = where
            else:
                chunk = alloc(self._home(role.size), role.size)
                bases[role.index] = chunk.begin.addr
                buffers[role.name] = chunk
                placement[f"{role.kind}:{role.name}"] = chunk.region.name
        for p in prog.intermediates:
            placement[f"intermediate:{p.name}"] = regions[p.base]
        return LoadedProgram(prog, chunks, prog_chunk.begin.addr, bases, buffers, placement)

    def direct_refusal(self, t: Tensor, nbytes: int, block: int) -> str | None:
        """None when the engine can store a program output of `nbytes` straight into tensor
        `t` (manual 1.3.2), else why the output is copied into it instead."""
        region = t.region
        if region is None or t.chunk is None:
            return "the tensor has no memory"
        try:
            same = self._device.get_mem_region(region.name) is region
        except XrtError:
            same = False
        if not same or region.name not in ("plddr", "udma", "ocm"):
            return f"{region.name} on {region.device!r} is not memory this engine writes"
        hw = t.hw_layout
        _, c, h, w = as_nchw(t.shape)
        if hw is not None:
            if hw != ChannelTiled(block) or t.layout not in ("NCHW", "NC"):
                return f"its hardware layout {hw.name} over {t.layout} is not the engine's"
        elif h * w != 1 or c % block:
            return (
                f"its layout is not the engine's (N, C/{block}, H, W, {block}): give it "
                f"hw_layout=ChannelTiled({block}) over NCHW"
            )
        addr = t.chunk.begin.addr + t.offset
        if addr % block:
            return f"address {addr:#x} is not a multiple of {block}"
        if t.nbytes < nbytes:
            return f"{t.nbytes} B, the program stores {nbytes} B"
        return None
