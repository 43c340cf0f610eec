"""Which operators an NPU backend binds beyond what the compiler can lower.

A relabelling reshape (`xrt.npu.compiler.is_alias`: the channel-tiled bytes stay the same,
so it compiles to no instruction) is worth binding only inside a program: continuing a run
this backend produces, or leading into operators the engine does work for. Alone between
host operators (SqueezeNet's Reshape back to 4-D after its Softmax) it would be a launch of
its own, a host round trip for a copy: the host relabels it instead.
"""

from __future__ import annotations

from xrt.backend._base import Backend
from xrt.backend._registry import BindContext
from xrt.hw.config import NpuConfig
from xrt.network import Operator
from xrt.npu.compiler import NPU_OP_TYPES, is_alias, refusal

__all__ = ["LONE_ALIAS", "lone_alias"]

LONE_ALIAS = (
    "a relabelling reshape between host operators: no work for the engine, and a launch of "
    "its own would cost a host round trip (the host relabels it)"
)
"""The placement report's reason for a `lone_alias`."""


def lone_alias(op: Operator, backend: Backend, config: NpuConfig, ctx: BindContext) -> bool:
    """Whether `op` is an alias reshape that would be a program alone on `backend` (an NPU
    backend compiling for `config`): its input comes from elsewhere and no operator the
    engine works on reads its output (directly or through further aliases)."""
    graph = ctx.graph
    if graph is None or not is_alias(op, graph.values):
        return False
    if ctx.producer_backend(op.inputs[0]) is backend:
        return False
    return not _leads_to_work(op.outputs[0], config, ctx)


def _leads_to_work(value: str, config: NpuConfig, ctx: BindContext) -> bool:
    graph = ctx.graph
    assert graph is not None
    for c in graph.ops:
        if value not in c.inputs or c.op_type not in NPU_OP_TYPES:
            continue
        if refusal(c, graph.values, graph.op_params(c), config) is not None:
            continue
        if not is_alias(c, graph.values) or _leads_to_work(c.outputs[0], config, ctx):
            return True
    return False
