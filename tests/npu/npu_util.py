"""Helpers of the compiler tests: one-op networks, compile + golden model vs the host."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from xrt.dtypes import QuantParams, TensorType
from xrt.hw.config import NpuConfig
from xrt.hw.targets import NPU
from xrt.network import Network, NetworkBuilder, run_network_reference
from xrt.npu.compiler import NpuProgram, compile_run, refusal
from xrt.npu.compiler._golden_run import run_on_golden

SMALL = dataclasses.replace(NPU, inp_rows=256, wgt_rows=64, acc_rows=128, prm_rows=16)
"""Tiny buffers: every layer of a test shape needs tiling over rows, blocks and passes."""


def single(
    op_type: str,
    inputs: list[np.ndarray],
    attrs: Mapping[str, Any],
    params: Mapping[str, np.ndarray] | None = None,
) -> tuple[Network, dict[str, np.ndarray]]:
    """A network of one int8 op over int8 inputs (scale 1), and its feeds."""
    b = NetworkBuilder("one")
    names = [
        b.input(f"x{i}", TensorType("SInt8", a.shape, quant=QuantParams(1.0)))
        for i, a in enumerate(inputs)
    ]
    refs = {role: b.param(role, arr) for role, arr in (params or {}).items()}
    (y,) = b.add(op_type, names, dict(attrs), refs)
    return b.build([y]), dict(zip(names, inputs, strict=True))


def npu_outputs(
    net: Network, feeds: Mapping[str, np.ndarray], cfg: NpuConfig = NPU
) -> tuple[dict[str, np.ndarray], NpuProgram, Any]:
    """Compile the whole network into one program and run it on the golden model."""
    prog = compile_run(net, cfg)
    outs, res = run_on_golden(prog, feeds, cfg=cfg)
    return outs, prog, res


def assert_npu_exact(
    net: Network, feeds: Mapping[str, np.ndarray], cfg: NpuConfig = NPU
) -> NpuProgram:
    """Compile + golden model must equal the host integer kernels bit for bit.

    A shape the tiny `SMALL` buffers cannot hold (the compiler refuses it, as it must) is
    compiled for the real buffers instead.
    """
    if cfg is SMALL and any(
        refusal(op, net.values, net.op_params(op), cfg) is not None for op in net.ops
    ):
        cfg = NPU
    outs, prog, res = npu_outputs(net, feeds, cfg)
    want = run_network_reference(net, dict(feeds))
    for name, ref in zip(net.outputs, want, strict=True):
        np.testing.assert_array_equal(outs[name], ref, err_msg=f"{name}\n{prog.report()}")
    assert sum(res.tokens_left.values()) == 0, res.tokens_left
    return prog


def i8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)
