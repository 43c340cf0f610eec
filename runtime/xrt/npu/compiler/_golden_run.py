"""Launch a compiled program on the golden model (tests, benchmarks, bring-up).

This is the driver sequence of docs/isa.md against `xrt.npu.golden` instead of the
device: place the constant blob, the inputs, the outputs and the scratch region in one
memory window, set one base register per role, run, read the outputs back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import NpuConfig
from xrt.hw.targets import NPU
from xrt.npu.compiler._layout import from_tiled, to_tiled
from xrt.npu.compiler._program import NpuProgram

__all__ = ["run_on_golden"]


def run_on_golden(
    prog: NpuProgram,
    feeds: Mapping[str, np.ndarray],
    target: str = "buyi",
    window: str = "plddr",
    cfg: NpuConfig = NPU,
    check: bool = True,
    intermediates: bool = False,
) -> tuple[dict[str, np.ndarray], Any]:
    """Run `prog` on the golden model with int8 NCHW `feeds`; returns (outputs, RunResult).

    With `check` (the default) the golden model's checker first examines the program for
    this launch: a race, a token error or a range error is an error, and so are tokens
    left at FINISH. With `intermediates`, the outputs also hold every intermediate tensor
    whose bytes still hold it at the end (`TensorPlacement.readable_after`), read back from
    its placement.

    Raises:
        XrtError: 11014 when the checker finds anything or the engine reports an error.
    """
    from xrt.npu import golden

    align = 4096
    sizes = [role.size for role in prog.bases]
    total = sum(-(-max(s, 1) // align) * align for s in sizes)
    mem = golden.Memory.for_target(target, {window: max(total, align)})
    win = next(w for w in mem.windows if w.name == window)
    addr = {}
    cursor = win.base
    for role, size in zip(prog.bases, sizes, strict=True):
        addr[role.index] = cursor
        cursor += -(-max(size, 1) // align) * align
    mem.write(addr[0], prog.constants)
    for binding in prog.inputs:
        data = to_tiled(
            np.asarray(feeds[binding.name], dtype=np.int8).reshape(binding.shape), prog.block
        )
        mem.write(addr[binding.base] + binding.offset, data)
    if check:
        report = golden.check(prog.instructions, addr, mem, cfg)
        if report.findings:
            raise XrtError(ErrorCode.DEVICE_INTERNAL, f"golden model checker:\n{report}")
    res = golden.run(prog.instructions, mem, addr, config=cfg)
    if not res.ok:
        raise XrtError(ErrorCode.DEVICE_INTERNAL, f"golden model: {res}")
    outs = {
        b.name: from_tiled(mem.read(addr[b.base] + b.offset, b.nbytes), b.shape, prog.block)
        for b in prog.outputs
    }
    if intermediates:
        for p in prog.intermediates:
            if p.readable_after and "#" not in p.name:
                raw = mem.read(addr[p.base] + p.offset, p.nbytes)
                outs[p.name] = from_tiled(raw, p.shape, prog.block)
    return outs, res
