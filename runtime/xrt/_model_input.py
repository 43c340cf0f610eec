"""The model a command works on, and its inputs: shared by ``xrt run`` and ``xrt compile``.

`load_network` imports an ONNX model or an xrt network file, `quantize` calibrates and
quantizes it (``--quantize``, ``--calib``, ``--calib-dir``, ``--seed``), `inputs` reads
``--input`` files or makes seeded random ones, `check_npu_gets_integers` refuses a float
network for an NPU backend with the reason.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xrt.backend import Backend
from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, is_quantized_op
from xrt.progress import progress

if TYPE_CHECKING:
    from xrt.quant import QuantReport

__all__ = ["check_npu_gets_integers", "inputs", "load_network", "quantize"]


def check_npu_gets_integers(net: Network, types: list[type[Backend]], *, quantized: bool) -> None:
    """An NPU backend with a float network would leave everything on the host: say so."""
    npu = [t.__name__ for t in types if not t.is_host]
    if not npu or any(is_quantized_op(op, net.values) for op in net.ops):
        return
    hint = "" if quantized else ": add --quantize (or give a network file saved after quantizing)"
    raise XrtError(
        ErrorCode.OUT_OF_RANGE,
        f"{', '.join(npu)} runs quantized (int8) networks only, and network {net.name!r} "
        f"has no integer operators{hint}",
    )


def load_network(path_text: str) -> Network:
    """The model at `path_text`: an xrt network file (``.json``) or ONNX."""
    path = Path(path_text)
    if not path.is_file():
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"model file {path_text!r} does not exist")
    with progress(f"loading {path.name}"):
        if path.suffix.lower() == ".json":
            return Network.load(path)
        return Network.from_onnx(path)


def quantize(net: Network, args: argparse.Namespace) -> tuple[Network, QuantReport]:
    """``--quantize``: calibrate on ``--calib`` random input sets (seeded by ``--seed``) or
    the files of ``--calib-dir``, then quantize to int8; with what the quantizer changed
    beyond rounding to keep the int32 accumulator bound (printed by both commands)."""
    if args.calib < 1:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"--calib must be >= 1, got {args.calib}")
    from xrt.quant import calibrate, quantize_with_report

    fed = [f"{op.describe()}: {', '.join(op.fed)}" for op in net.ops if op.fed]
    if fed:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"--quantize needs constant parameters; these are fed at run time: {fed[:3]} "
            "(give them initializers in the model, or run without --quantize on the host)",
        )
    if args.calib_dir is not None:
        samples = _calibration_dir(net, args.calib_dir)
    else:
        samples = [inputs(net, [], args.seed + 1000 + i)[0] for i in range(args.calib)]
    with progress(f"calibrating on {len(samples)} input sets"):
        return quantize_with_report(net, ranges=calibrate(net, samples))


def _random_input(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    dt = t.dtype
    if dt.is_float:
        return rng.standard_normal(t.shape).astype(dt.numpy)
    if dt is DataType.BOOL:
        return rng.integers(0, 2, t.shape).astype(np.bool_)
    info = np.iinfo(dt.numpy)
    return rng.integers(info.min, info.max, t.shape, dtype=dt.numpy, endpoint=True)


def _load_npy(path_text: str) -> np.ndarray:
    path = Path(path_text)
    if not path.is_file():
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"input file {path_text!r} does not exist")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise XrtError(
            ErrorCode.LOAD_FAILED, f"input file {path_text!r} is not a valid .npy file: {exc}"
        ) from None
    if not isinstance(arr, np.ndarray):
        raise XrtError(
            ErrorCode.LOAD_FAILED, f"input file {path_text!r} holds several arrays (.npz)"
        )
    return arr


def inputs(net: Network, specs: list[str], seed: int) -> tuple[dict[str, np.ndarray], list[str]]:
    """The inputs of a run (name -> array) and where each came from: ``--input`` files
    (positional or ``NAME=FILE.npy``), else seeded random values."""
    names = list(net.inputs)
    if not specs:
        rng = np.random.default_rng(seed)
        feed = {n: _random_input(net.values[n], rng) for n in names}
        return feed, [f"random (seed {seed})"] * len(names)
    positional = [s for s in specs if "=" not in s]
    named = [s.split("=", 1) for s in specs if "=" in s]
    if positional and named:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE, "give --input either all as FILE.npy or all as NAME=FILE.npy"
        )
    if positional:
        if len(positional) != len(names):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"the network has {len(names)} input(s) {names}, got {len(positional)} --input",
            )
        pairs = list(zip(names, positional, strict=True))
    else:
        pairs = [(n, p) for n, p in named]
        unknown = [n for n, _ in pairs if n not in names]
        missing = [n for n in names if n not in dict(pairs)]
        if unknown or missing:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"inputs are {names}; unknown {unknown}, missing {missing}",
            )
    where = dict(pairs)
    feed = {n: _load_npy(p) for n, p in pairs}
    return feed, [where[n] for n in names]


def _calibration_dir(net: Network, folder: str) -> list[dict[str, np.ndarray]]:
    path = Path(folder)
    if not path.is_dir():
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"calibration folder {folder!r} does not exist")
    files = sorted(path.glob("*.npy"))
    if not files:
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"calibration folder {folder!r} has no .npy files")
    if len(net.inputs) != 1:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"--calib-dir feeds single-input networks; this one has inputs {list(net.inputs)}",
        )
    return [{net.inputs[0]: _load_npy(str(f))} for f in files]
