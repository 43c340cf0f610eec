"""Compile a run of a network ahead of time into a ``HardOp`` (the manual's "BY stage").

The Icraft flow hands the runtime networks whose NPU parts are already ``HardOp``
operators holding compiled programs; the manual's examples bind such a network
(``Input -> Conv2d -> Cast -> HardOp -> Cast -> ReLU -> MaxPool2d -> Output``). `to_hardop`
makes one from a quantized network: the operators `op_ids` are compiled into one program
(`xrt.npu.compiler.compile_run`), serialized into the HardOp's ``program`` parameter and
replaced by it. `BuyiBackend` / `ZG330Backend` run a HardOp whose ``target`` is theirs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xrt.backend.npu._serialize import program_to_bytes
from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import NpuConfig
from xrt.hw.targets import NPU, TARGETS
from xrt.network import Network, NetworkView, Operator
from xrt.npu.compiler import compile_run
from xrt.ops import refuse_boundary
from xrt.ops.hardop_placeholder import output_type_to_json

__all__ = ["ocm_bytes", "to_hardop"]


def ocm_bytes(target: str) -> int:
    """Size of `target`'s on-chip memory (0 when it has none), from the hardware config."""
    cfg = TARGETS.get(target)
    return next((m.size for m in cfg.memories if m.name == "ocm"), 0) if cfg else 0


def to_hardop(
    network: Network, op_ids: Sequence[int], target: str, config: NpuConfig = NPU
) -> Network:
    """`network` with the consecutive operators `op_ids` replaced by one compiled HardOp.

    Raises:
        XrtError: 11003 when the operators are not consecutive, include the Input or
            Output op, or the compiler refuses one (naming it and why).
    """
    ids = list(op_ids)
    order = network.op_ids
    start = order.index(ids[0]) if ids and ids[0] in order else -1
    if start < 0 or order[start : start + len(ids)] != ids:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"ops {ids} are not consecutive in {network.name}")
    for i in ids:
        refuse_boundary(network.op(i).op_type, f"to_hardop: op {i}")
    run = NetworkView(network, [network.op(i) for i in ids])
    prog = compile_run(run, config, ocm_bytes=ocm_bytes(target))
    blob = np.frombuffer(program_to_bytes(prog), dtype=np.uint8).copy()
    param = f"hardop_{ids[0]}_program"
    hard = Operator(
        ids[0],
        "HardOp",
        tuple(run.inputs),
        tuple(run.outputs),
        {
            "target": target,
            "output_types": [output_type_to_json(network.values[v]) for v in run.outputs],
            "op_ids": ids,
        },
        {"program": param},
        f"hardop_{ids[0]}",
    )
    inside = {v for op in run.ops for v in op.outputs} - set(run.outputs)
    ops = [op for op in network.ops if op.op_id not in ids[1:]]
    ops[start] = hard
    used = {name for op in ops for name in op.params.values()}
    params = {k: v for k, v in network.params.items() if k in used}
    params[param] = blob
    values = {k: v for k, v in network.values.items() if k not in inside}
    return Network(ops, values, network.inputs, network.outputs, params, network.name)
