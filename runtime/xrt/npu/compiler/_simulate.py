"""Run a whole quantized network with its NPU runs on the golden model (tests, benchmarks).

This is how a backend will split a network, without the device: consecutive operators the
compiler accepts (`refusal` is None) form one run, compiled into one program and executed
by the golden model; every other operator runs on the host kernel. It is not a backend
(issue 11 builds those); it lets the compiler be checked on whole networks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from xrt.hw.config import NpuConfig
from xrt.hw.targets import NPU
from xrt.network import Network, NetworkView, Operator
from xrt.network.reference import check_inputs
from xrt.npu.compiler._compile import Plans, compile_run
from xrt.npu.compiler._golden_run import run_on_golden
from xrt.npu.compiler._op_table import RELABELLING_OP_TYPES, refusal
from xrt.npu.compiler._program import NpuProgram
from xrt.ops import is_boundary

__all__ = ["NpuRun", "partition", "simulate_network"]


@dataclass
class NpuRun:
    """One compiled run and what the golden model reported for it."""

    program: NpuProgram
    result: Any
    compile_seconds: float


def partition(net: Network, cfg: NpuConfig = NPU) -> list[tuple[bool, list[Operator]]]:
    """Maximal runs of consecutive operators: ``(True, ops)`` for the NPU, else host ops."""
    groups: list[tuple[bool, list[Operator]]] = []
    for op in net.ops:
        if is_boundary(op):  # computes nothing: the feeds and outputs are in env already
            continue
        npu = refusal(op, net.values, net.op_params(op), cfg) is None
        if npu and groups and groups[-1][0] and _bases_fit(net, [*groups[-1][1], op], cfg):
            groups[-1][1].append(op)
        else:
            groups.append((npu, [op]))
    # A run of only aliases (reshapes) is no work for the NPU.
    return [
        (npu and any(o.op_type not in RELABELLING_OP_TYPES for o in ops), ops)
        for npu, ops in groups
    ]


def _bases_fit(net: Network, ops: list[Operator], cfg: NpuConfig) -> bool:
    """Whether a run's inputs and outputs, the constants and scratch fit the base registers."""
    inside = {op.op_id for op in ops}
    produced = {v for op in ops for v in op.outputs}
    ins = {v for op in ops for v in op.inputs if v not in produced}
    outs = {
        v
        for v in produced
        if v in net.outputs or any(c.op_id not in inside for c in net.consumers(v))
    }
    return len(ins) + len(outs) + 2 <= cfg.base_regs


def simulate_network(
    net: Network,
    feeds: Mapping[str, np.ndarray],
    cfg: NpuConfig = NPU,
    plans_for: Callable[[NetworkView], Plans] | None = None,
) -> tuple[list[np.ndarray], list[NpuRun]]:
    """The network's outputs with NPU runs on the golden model, and each run's report.

    `plans_for` gives the tilings to compile each run with (tuning records:
    ``xrt.tuning.NpuTuner.plans_for``); by default the tiler's.
    """
    import time

    env: dict[str, np.ndarray] = dict(check_inputs(net, dict(feeds)))
    runs: list[NpuRun] = []
    for npu, ops in partition(net, cfg):
        if not npu:
            for op in ops:
                outs = op.op_def.forward(op, [env[v] for v in op.inputs], net.op_params(op))
                env.update(zip(op.outputs, outs, strict=True))
            continue
        view = NetworkView(net, ops)
        t0 = time.perf_counter()
        prog = compile_run(view, cfg, plans=plans_for(view) if plans_for else None)
        t1 = time.perf_counter()
        outs, res = run_on_golden(prog, {v: env[v] for v in view.inputs}, cfg=cfg)
        prog.estimated_cycles = res.cycles.total
        env.update(outs)
        runs.append(NpuRun(prog, res, t1 - t0))
    return [env[v] for v in net.outputs], runs
