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

__all__ = ["run_on_golden", "simulated_cycles"]


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


def simulated_cycles(
    prog: NpuProgram, target: str = "buyi", cfg: NpuConfig = NPU, on_chip: bool = False
) -> int:
    """The golden model's cycle count of one launch of `prog`, without executing it.

    The cost model's schedule depends on the instructions and on which memory each
    transfer touches, not on the data, so the program is scheduled only
    (``golden.run(execute=False)``): what tuning measures candidate tilings with. The
    on-chip scratch role (``ocm``) lies in the OCM; every other role (constants, inputs,
    outputs, external scratch) in ``plddr``, or in the OCM too with `on_chip` when the
    target has one and they all fit (ZG330 keeps a small program's tensors on chip).

    Raises:
        XrtError: 11014 when the schedule stops on an engine error.
    """
    from xrt.hw.targets import target as target_config
    from xrt.npu import golden

    align = 4096
    tgt = target_config(target)
    pages = {role.index: -(-max(role.size, 1) // align) * align for role in prog.bases}
    in_ocm = {r.index for r in prog.bases if r.kind == "ocm"}
    if on_chip and tgt.has_memory("ocm") and sum(pages.values()) <= tgt.memory("ocm").size:
        in_ocm = set(pages)
    used = {"ocm": sum(pages[i] for i in in_ocm)}
    used["plddr"] = sum(pages.values()) - used["ocm"]
    sizes = {w.name: max(used.get(w.name, 0), align) for w in tgt.memories}
    mem = golden.Memory.for_target(tgt, sizes)
    cursor = {w.name: w.base for w in mem.windows}
    addr = {}
    for role in prog.bases:
        where = "ocm" if role.index in in_ocm else "plddr"
        addr[role.index] = cursor[where]
        cursor[where] += pages[role.index]
    res = golden.run(prog.instructions, mem, addr, config=cfg, execute=False)
    if not res.ok:
        raise XrtError(ErrorCode.DEVICE_INTERNAL, f"golden model: {res}")
    return int(res.cycles.total)
