"""ONNX's own backend node tests (`onnx.backend.test.case.node`), run through HostBackend.

The onnx wheel does not ship the node-test data files, so the cases are generated in
memory by the installed onnx (its `collect_testcases`, the same code that writes the data
files). A case passes when every one of its data sets gives the expected outputs within
the case's own tolerances (rtol 1e-3, atol 1e-7 unless the case says otherwise).

Every case runs as shipped: ONNX feeds weights, shapes, axes, pads, scales and bounds as
graph inputs, and the importer binds them as run-time parameters (fed at each forward).
Only the `FOLDED_OPS` cases get their inputs fixed at import (see there).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import onnx
from onnx import numpy_helper

from xrt.backend import HostBackend
from xrt.errors import XrtError
from xrt.network import SUPPORTED_ONNX_OPS, Network
from xrt.session import Session


@dataclass(frozen=True)
class NodeCase:
    name: str
    op_type: str
    model: onnx.ModelProto
    data_sets: tuple[tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]], ...]
    rtol: float
    atol: float


@lru_cache(maxsize=1)
def node_cases() -> dict[str, list[NodeCase]]:
    """Every node test case of the installed onnx, by the op type it tests (single-node
    models only: the ``_expanded`` variants test ONNX function bodies)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        raw = collect_testcases(None)
    out: dict[str, list[NodeCase]] = {}
    for case in raw:
        if case.kind != "node" or "_expanded" in case.name or case.model is None:
            continue
        ops = {n.op_type for n in case.model.graph.node}
        if len(ops) != 1:
            continue
        op_type = next(iter(ops))
        if not all(
            isinstance(a, np.ndarray | np.generic)
            for ins, outs in (case.data_sets or [])
            for a in (*ins, *outs)
        ):
            continue  # sequences, maps, optionals: not tensors
        sets = tuple(
            (tuple(np.asarray(a) for a in ins), tuple(np.asarray(a) for a in outs))
            for ins, outs in (case.data_sets or [])
        )
        out.setdefault(op_type, []).append(
            NodeCase(case.name, op_type, case.model, sets, case.rtol or 1e-3, case.atol or 1e-7)
        )
    return out


def supported_cases() -> Iterator[NodeCase]:
    cases = node_cases()
    for op in SUPPORTED_ONNX_OPS:
        yield from cases.get(op, [])


def _close(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> str | None:
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != expected {expected.dtype}"
    if expected.dtype.kind in "fc":
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        ok = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    else:
        ok = actual == expected
    if not np.all(ok):
        return f"{int(np.size(ok) - np.count_nonzero(ok))} of {np.size(ok)} values differ"
    return None


FOLDED_OPS = ("Shape", "Size", "ConstantOfShape", "Range", "Constant")
"""ONNX ops the importer evaluates at import time instead of mapping to an xrt op: shape
arithmetic whose results are constants in real networks (a Shape of a value of static
shape, the ConstantOfShape and Range chains exporters build from it, Constant nodes). The
importer has no run-time form of them by design, so their cases run with every input fixed
to the data set's value at import (``input_values``), except Shape's and Size's data input,
whose shape is what they read."""


def run_case(case: NodeCase) -> str | None:
    """None when the case passes, else why it fails (first problem)."""
    input_names = [i.name for i in case.model.graph.input]
    for ins, outs in case.data_sets:
        feeds = dict(zip(input_names, ins, strict=False))
        fixed: dict[str, np.ndarray] = {}
        if case.op_type in FOLDED_OPS and case.op_type not in ("Shape", "Size"):
            fixed, feeds = feeds, {}
        try:
            net = Network.from_onnx(case.model, input_values=fixed)
            with Session.create([HostBackend], net) as sess:
                sess.apply()
                got = [t.numpy() for t in sess.forward({n: feeds[n] for n in net.inputs})]
        except XrtError as exc:
            return f"[{exc.code.value}] {exc.message}"
        for k, (a, e) in enumerate(zip(got, outs, strict=False)):
            why = _close(a, e, case.rtol, case.atol)
            if why:
                return f"output {k}: {why}"
        if len(got) != len(outs):
            return f"{len(got)} outputs, expected {len(outs)}"
    return None


WHEEL_DATA = __import__("pathlib").Path(onnx.__file__).parent / "backend" / "test" / "data"
WHEEL_MODEL_KINDS = ("pytorch-converted", "pytorch-operator", "simple")
"""Folders of whole-model tests the onnx wheel ships with their data files."""


def _load_tensors(folder: object, prefix: str) -> tuple[np.ndarray, ...]:
    files = sorted(
        folder.glob(f"{prefix}_*.pb"),  # type: ignore[attr-defined]
        key=lambda p: int(p.stem.rsplit("_", 1)[1]),
    )
    return tuple(numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files)


def wheel_model_cases(kind: str) -> list[NodeCase]:
    """The model tests of one `WHEEL_MODEL_KINDS` folder, with their stored data sets."""
    out = []
    for d in sorted((WHEEL_DATA / kind).iterdir()):
        model = onnx.load(str(d / "model.onnx"))
        sets = tuple(
            (_load_tensors(ds, "input"), _load_tensors(ds, "output"))
            for ds in sorted(d.glob("test_data_set_*"))
        )
        out.append(NodeCase(d.name, kind, model, sets, 1e-3, 1e-7))
    return out
