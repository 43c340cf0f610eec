"""Taking a checkpoint of a simulated device, and putting one into it.

`take` has the worker read the configuration registers and save the model's state, then
reads the memory files here. `apply` puts a checkpoint back in one of two scopes
(`xrt.hw.wire.CheckpointScope`):

- WHOLE: the model's state (the worker checks it against its own layout before Verilator
  reads it: rtl/sim/npu_model_state.h), then every memory. The caller decides whether the
  model state may be restored (`npuemu.server.checkpoint_seal`: a shared server restores
  only states it sealed itself).
- PORTABLE: the device goes back to the state every lease starts from (the worker's
  pristine state), then every memory and the configuration registers are put in through
  the bus, as a driver would. Nothing of the file reaches the model but register values
  the bus accepts.

Memory pages are written with `pwrite`, a step at a time as they are inflated
(`MemoryImage.blocks`): a checkpoint's memories never sit decoded in the server.
"""

from __future__ import annotations

import asyncio
import ctypes
import mmap
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from npuemu.server.checkpoint import PAGE, REG_DTYPE, Checkpoint, CheckpointError, MemoryImage
from xrt.hw.config import TargetConfig
from xrt.hw.port import (
    ModelRestore,
    ModelSave,
    PristineRestore,
    RegBatch,
    RegResults,
    Reply,
    Request,
    StateSaved,
)
from xrt.hw.regops import RegKind, RegRow
from xrt.hw.regs import DMA, NPU, configuration_registers
from xrt.hw.wire import CheckpointScope, RegisterStatus

__all__ = [
    "SimDevice",
    "WorkerCall",
    "apply",
    "configuration_addresses",
    "memory_image",
    "restore_model_state",
    "take",
    "write_memories",
    "write_memory_image",
]

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02

WorkerCall = Callable[[Request], Awaitable[Reply]]
"""How a checkpoint's requests reach the worker (a holder's `SimDevice.bind`, a replay's)."""


class _Memory(Protocol):
    @property
    def fds(self) -> dict[str, int]: ...


class _Model(Protocol):
    @property
    def digest(self) -> str: ...


class SimDevice(Protocol):
    """What a checkpoint needs of a device (`npuemu.server.devices.SimDevice`)."""

    name: str
    target: TargetConfig
    folder: Path

    @property
    def model(self) -> _Model: ...

    @property
    def memory(self) -> _Memory: ...


def configuration_addresses(cfg: TargetConfig) -> list[int]:
    """Physical addresses of the configuration registers, in a fixed order."""
    return [
        base + reg.offset
        for base, block in ((cfg.npu_base, NPU), (cfg.dma_base, DMA))
        for reg in configuration_registers(block)
    ]


# ---------------------------------------------------------------------- memory files
def memory_image(name: str, fd: int, size: int) -> MemoryImage:
    """Read the non-zero pages of the memory file `fd` (`size` bytes). Holes (never
    written pages of a sparse file) are skipped without reading them (SEEK_DATA)."""
    pages: list[np.ndarray] = []
    chunks: list[bytes] = []
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
        for start, end in _data_extents(fd, size):
            first, last = start // PAGE, -(-end // PAGE)
            block = np.frombuffer(mm, np.uint8, (last - first) * PAGE, first * PAGE)
            nonzero = np.flatnonzero(block.view(np.uint64).reshape(-1, PAGE // 8).any(axis=1))
            if len(nonzero):
                pages.append((nonzero + first).astype(np.uint32))
                chunks.append(block.reshape(-1, PAGE)[nonzero].tobytes())
            del block  # no export of the mapping may outlive it
    index = np.concatenate(pages) if pages else np.zeros(0, np.uint32)
    return MemoryImage(name, size, index, b"".join(chunks))


def _data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """Page-aligned (start, end) spans of `fd` that may hold data (all of it where the
    file system cannot tell holes)."""
    spans = []
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after pos
                break
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            start -= start % PAGE
            spans.append((start, end))
            pos = end
    except (AttributeError, OSError):
        return [(0, size)]
    return spans


def write_memory_image(fd: int, image: MemoryImage) -> None:
    """Make the memory file `fd` hold exactly `image`: every page zero (the file's blocks
    freed), then the image's non-zero pages written (a page of zeros stays a hole), each
    run of consecutive pages in one pwrite."""
    _zero_file(fd, image.size)
    for pages, data in image.blocks():
        rows = np.frombuffer(data, np.uint64).reshape(len(pages), PAGE // 8)
        keep = np.flatnonzero(rows.any(axis=1))
        if not len(keep):
            continue
        numbers = pages[keep].astype(np.int64)
        # runs: consecutive page numbers that are also consecutive in the block
        breaks = (np.diff(numbers, prepend=-2) != 1) | (np.diff(keep, prepend=-2) != 1)
        starts = np.flatnonzero(breaks)
        ends = np.append(starts[1:], len(keep))
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            first = int(keep[a])
            _pwrite_all(fd, data[first * PAGE : (first + b - a) * PAGE], int(numbers[a]) * PAGE)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n


def _zero_file(fd: int, size: int) -> None:
    """Zero the file and free its blocks: punch one hole over all of it (the size stays),
    or, where the file system cannot, cut it to nothing and grow it back."""
    libc = ctypes.CDLL(None, use_errno=True)
    punch = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
    if libc.fallocate(fd, punch, ctypes.c_long(0), ctypes.c_long(size)) == 0:
        return
    os.ftruncate(fd, 0)
    os.ftruncate(fd, size)


# ---------------------------------------------------------------------- on a device
async def take(
    device: SimDevice, call: WorkerCall, wait_cycles: int = 0
) -> tuple[Checkpoint, Reply]:
    """Take `device`'s checkpoint: in one request the worker saves the model's state
    (engines idle, or it waits up to `wait_cycles` for them), reads the configuration
    registers and puts the saved state back (the reads took bus cycles: a checkpoint
    leaves the device as it found it, so a device and a restored copy of it run on
    alike); then the memories are read here. `call` is how worker requests go (the lease
    holder's `SimDevice.call`, bound to its lease). Returns the checkpoint (unsealed: the
    caller seals its file) and the worker's reply to the save (its cycle and instant: a
    recording keeps them)."""
    path = _state_path(device)
    addresses = configuration_addresses(device.target)
    try:
        reply = await call(ModelSave(str(path), wait_cycles, tuple(addresses)))
        state = path.read_bytes()
    finally:
        path.unlink(missing_ok=True)
    results = reply.body_as(StateSaved).registers
    if len(results) != len(addresses) or any(s != RegisterStatus.OK for s, _ in results):
        raise CheckpointError("the configuration registers could not be read")
    registers = np.array([(a, v) for a, (_, v) in zip(addresses, results, strict=True)], REG_DTYPE)
    fds = _own_fds(device)

    def read() -> list[MemoryImage]:
        try:
            return [memory_image(name, fd, size) for name, (fd, size) in fds.items()]
        finally:
            _close(fds)

    taken = Checkpoint(
        target=device.target.name,
        model_digest=device.model.digest,
        cycle=reply.cycles,
        model_state=state,
        memories=await asyncio.to_thread(read),
        registers=registers,
        device=device.name,
    )
    return taken, reply


async def apply(
    device: SimDevice,
    checkpoint: Checkpoint,
    call: WorkerCall,
    scope: CheckpointScope = CheckpointScope.WHOLE,
) -> Reply:
    """Put `checkpoint` into `device` in `scope` (the module docstring), then make every
    memory file hold the checkpoint's pages (memories it lacks are zeroed). Returns the
    worker's reply to the state change (the cycle and instant it was put in). Checks that
    the checkpoint fits first: a refused one changes nothing."""
    if scope == CheckpointScope.WHOLE:
        checkpoint.check_fits(device.target, device.model.digest)
        reply = await restore_model_state(device, checkpoint.model_state, call)
    else:
        checkpoint.check_portable(device.target)
        reply = await call(PristineRestore())
    await write_memories(device, checkpoint)
    if scope == CheckpointScope.PORTABLE and len(checkpoint.registers):
        regs = checkpoint.registers
        rows = [RegRow(RegKind.WRITE, int(r["addr"]), int(r["value"])) for r in regs]
        results = (await call(RegBatch.of_rows(rows))).body_as(RegResults)
        if len(results) != len(rows) or not results.all_ok:
            raise CheckpointError("the checkpoint's configuration registers could not be written")
    return reply


async def restore_model_state(device: SimDevice, state: bytes, call: WorkerCall) -> Reply:
    """Have the worker restore the model state `state` (through a 0600 file in the
    server's private folder; the worker checks it against its own layout first)."""
    path = _state_path(device)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(state)
        return await call(ModelRestore(str(path)))
    finally:
        path.unlink(missing_ok=True)


async def write_memories(device: SimDevice, checkpoint: Checkpoint) -> None:
    """Make every memory file of `device` hold `checkpoint`'s pages (zero where it has
    none), in a thread."""
    images = {m.name: m for m in checkpoint.memories}
    fds = _own_fds(device)

    def write() -> None:
        try:
            for name, (fd, size) in fds.items():
                empty = MemoryImage(name, size, np.zeros(0, np.uint32), b"")
                write_memory_image(fd, images.get(name, empty))
        finally:
            _close(fds)

    await asyncio.to_thread(write)


def _own_fds(device: SimDevice) -> dict[str, tuple[int, int]]:
    """Duplicates of the device's memory files (and their sizes), taken with no await
    since the worker's reply: the files of the lease that asked. Should that lease end
    while a thread reads or writes them, the server renews the device's files and closes
    its own descriptors; these keep pointing at the old files, never at a number the next
    lease's files reuse."""
    return {
        name: (os.dup(fd), device.target.memory(name).size)
        for name, fd in device.memory.fds.items()
    }


def _close(fds: dict[str, tuple[int, int]]) -> None:
    for fd, _ in fds.values():
        os.close(fd)


def _state_path(device: SimDevice) -> Path:
    """A fresh file name for the model's state, in the server's private folder."""
    return device.folder / f"{device.name}-state-{secrets.token_hex(8)}.vlsave"
