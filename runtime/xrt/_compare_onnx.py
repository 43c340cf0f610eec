"""``xrt run --compare onnxruntime``: the same inputs through onnxruntime, the float
reference, and every output checked within ``--atol``/``--rtol`` (numpy's `isclose` rule,
``|got - expected| <= atol + rtol * |expected|``; NaN matches NaN).

`--compare host` asks for bit-exactness against our own host backend; this asks a question
only an independent implementation answers: is the network (imported, perhaps quantized,
compiled for an NPU) still the model its author exported? A quantized run differs from the
float model by its quantization error, so the report gives each output's largest absolute
and relative error, from which a CI job picks its tolerances.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xrt.errors import ErrorCode, XrtError

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "OnnxComparison",
    "check_tolerances",
    "compare_onnxruntime",
]

DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 1e-3


def check_tolerances(args: argparse.Namespace, container: bool) -> None:
    """Before anything runs: ``--atol``/``--rtol`` only with ``--compare onnxruntime``, never
    negative (their defaults filled in), and a model onnxruntime can read."""
    given = [f"--{n} {v}" for n in ("atol", "rtol") if (v := getattr(args, n, None)) is not None]
    if args.compare != "onnxruntime":
        if given:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"{given[0]} applies to --compare onnxruntime only"
            )
        return
    for name, default in (("atol", DEFAULT_ATOL), ("rtol", DEFAULT_RTOL)):
        value = getattr(args, name, None)
        if value is None:
            setattr(args, name, default)
        elif not value >= 0:  # NaN too
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"--{name} must be >= 0, got {value}")
    model = args.model
    if container or Path(model).suffix.lower() == ".json":
        kind = "a program container" if container else "an xrt network file"
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"--compare onnxruntime needs the ONNX model, and {model} is {kind}: give the "
            ".onnx file it came from, or use --compare host",
        )


@dataclass
class OnnxComparison:
    """Per output: the largest errors and how many elements are out of tolerance."""

    atol: float
    rtol: float
    outputs: dict[str, dict[str, Any]]
    note: str = ""  # how the model was given to onnxruntime, when not as it is

    @property
    def ok(self) -> bool:
        return all(o["mismatched"] == 0 for o in self.outputs.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "against": "onnxruntime",
            "atol": self.atol,
            "rtol": self.rtol,
            "within_tolerance": self.ok,
            "outputs": self.outputs,
            **({"note": self.note} if self.note else {}),
        }

    def lines(self) -> list[str]:
        out = [f"compare onnxruntime: {self.note}"] if self.note else []
        for name, o in self.outputs.items():
            where = (
                f"; first at {o['first']}: {o['got']} vs {o['expected']}" if o["mismatched"] else ""
            )
            out.append(
                f"compare onnxruntime: output {name!r}: max abs error {o['max_abs_error']:.3g}, "
                f"max rel error {o['max_rel_error']:.3g}, {o['mismatched']} of {o['elements']} "
                f"element(s) outside atol {self.atol:g} + rtol {self.rtol:g}{where}"
            )
        return out


def _one_output(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> dict[str, Any]:
    if got.shape != expected.shape:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"onnxruntime gives shape {list(expected.shape)}, the run {list(got.shape)}",
        )
    a = got.astype(np.float64)
    b = expected.astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    err = np.where(both_nan, 0.0, np.abs(a - b))
    err = np.where(np.isnan(err), np.inf, err)  # NaN against a number is out of any tolerance
    bad = err > atol + rtol * np.abs(b)
    rel = err / np.maximum(np.abs(b), np.finfo(np.float64).tiny)
    entry: dict[str, Any] = {
        "elements": int(a.size),
        "mismatched": int(bad.sum()),
        "max_abs_error": float(err.max()) if err.size else 0.0,
        "max_rel_error": float(np.where(err == 0, 0.0, rel).max()) if err.size else 0.0,
    }
    if entry["mismatched"]:
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        entry.update(first=list(index), got=float(a[index]), expected=float(b[index]))
    return entry


def _ort_session(ort: Any, model: str, options: Any) -> tuple[Any, str]:
    """An onnxruntime session of `model`; a model saved with a newer IR version than this
    onnxruntime reads (onnx writes its newest) is given to it as the newest it reads, with
    a note saying so: operators are versioned by their opset, not by the IR version."""
    providers = ["CPUExecutionProvider"]
    try:
        return ort.InferenceSession(model, options, providers=providers), ""
    except Exception as exc:  # onnxruntime's own errors have no common base class
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        newest = re.search(r"max supported IR version: (\d+)", first)
        if newest is None:
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"onnxruntime cannot load {model}: {first}"
            ) from None
    import onnx

    proto = onnx.load(model)
    saved = proto.ir_version
    proto.ir_version = int(newest.group(1))
    try:
        sess = ort.InferenceSession(proto.SerializeToString(), options, providers=providers)
    except Exception as exc:
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"onnxruntime cannot load {model}: {str(exc).splitlines()[0]}"
        ) from None
    return (
        sess,
        f"{model} has IR version {saved}; onnxruntime was given it as IR version "
        f"{proto.ir_version}",
    )


def compare_onnxruntime(
    model: str,
    feed: dict[str, np.ndarray],
    outs: dict[str, np.ndarray],
    atol: float,
    rtol: float,
) -> OnnxComparison:
    """Run `model` with onnxruntime on `feed` and compare each of `outs` with its output."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise XrtError(
            ErrorCode.FILE_NOT_FOUND,
            "--compare onnxruntime needs the onnxruntime package (pip install onnxruntime; "
            "make install has it)",
        ) from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # the same numbers on any machine, and no thread storm
    options.log_severity_level = 3
    sess, note = _ort_session(ort, model, options)
    dtypes = {
        "tensor(float)": np.float32,
        "tensor(double)": np.float64,
        "tensor(float16)": np.float16,
    }
    ort_feed = {}
    for i in sess.get_inputs():
        if i.name not in feed:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"onnxruntime wants input {i.name!r}, the run has {list(feed)}",
            )
        ort_feed[i.name] = np.asarray(feed[i.name], dtype=dtypes.get(i.type, feed[i.name].dtype))
    names = [o.name for o in sess.get_outputs()]
    expected = dict(zip(names, sess.run(names, ort_feed), strict=True))
    missing = [n for n in outs if n not in expected]
    if missing:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"onnxruntime has no output {missing[0]!r} (its outputs: {names})",
        )
    return OnnxComparison(
        atol,
        rtol,
        {n: _one_output(np.asarray(outs[n]), np.asarray(expected[n]), atol, rtol) for n in outs},
        note,
    )
