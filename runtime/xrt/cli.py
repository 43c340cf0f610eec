"""The ``xrt`` command: ``xrt run MODEL`` runs a model through a `xrt.session.Session`.

::

    xrt run MODEL.onnx [--device URL] [--backends host[,NAME...]] [--input FILE.npy ...]
                       [--seed N] [--profile] [--trace FILE] [--quantize [--calib N]]
                       [--values N]

MODEL is an ONNX file (imported with `Network.from_onnx`) or a network file of
docs/network-format.md (``.json``, with its ``.raw`` next to it). Without ``--input`` every
input gets seeded random values (normal for floats, uniform over the type for integers).
``--input`` takes one ``.npy`` file per network input, in order, or ``NAME=FILE.npy``.
It prints each output's type, its first values, min/max/mean and, for a classifier-shaped
output (``[1, K]`` or ``[K]`` with K >= 5), the top 5; with ``--profile`` the per-operator
time table and the memory plan; with ``--trace FILE`` the forward's timeline as Chrome trace
JSON (ui.perfetto.dev). ``--quantize`` calibrates on ``--calib`` random input sets
and runs the int8 network (docs/quantization.md) instead.

Exit status: 0 on success; 2 for bad arguments or input (missing files: XrtError 11002;
malformed: 11003/11010; corrupt: 11011); 1 when running fails (11012..11015).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from xrt.backend import Backend, get_backend_type
from xrt.device import Device, HostDevice
from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network
from xrt.progress import progress
from xrt.session import Session

__all__ = ["main"]

_INPUT_ERRORS = {
    ErrorCode.FILE_NOT_FOUND,
    ErrorCode.OUT_OF_RANGE,
    ErrorCode.WRONG_TYPE,
    ErrorCode.LOAD_FAILED,
}


class _HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except None/False ones and those the help already states."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False) or "default" in text:
            return text
        return super()._get_help_string(action)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("npu-emu")
    except PackageNotFoundError:
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xrt",
        description="The xrt runtime's command line (see docs/session.md).",
        formatter_class=_HelpWithDefaults,
    )
    parser.add_argument("--version", action="version", version=f"xrt {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run a model and print its outputs",
        description="Run MODEL (.onnx, or an xrt network .json) through a Session.",
        formatter_class=_HelpWithDefaults,
    )
    run.add_argument("model", help="ONNX model or xrt network file (.json)")
    run.add_argument(
        "--device", default=None, help="device URL for the non-host backends (e.g. grpc://...)"
    )
    run.add_argument(
        "--backends",
        default="host",
        help="comma-separated backend names, highest priority first (default: host)",
    )
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="FILE.npy",
        help="an input array (.npy); repeat per network input, or NAME=FILE.npy",
    )
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run.add_argument("--profile", action="store_true", help="print the per-operator time table")
    run.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="write the forward's timeline as Chrome trace JSON (open it in ui.perfetto.dev)",
    )
    run.add_argument(
        "--quantize", action="store_true", help="quantize to int8 (random calibration data)"
    )
    run.add_argument(
        "--calib", type=int, default=8, help="calibration input sets for --quantize (default 8)"
    )
    run.add_argument(
        "--calib-dir",
        default=None,
        metavar="DIR",
        help="calibrate --quantize on the .npy files in DIR (one per input set, sorted by "
        "name; a single-input network) instead of random data",
    )
    run.add_argument("--values", type=int, default=8, help="values printed per output (default 8)")
    return parser


def _load_network(path_text: str) -> Network:
    path = Path(path_text)
    if not path.is_file():
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"model file {path_text!r} does not exist")
    if path.suffix.lower() == ".json":
        return Network.load(path)
    return Network.from_onnx(path)


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


def _inputs(net: Network, specs: list[str], seed: int) -> tuple[dict[str, np.ndarray], list[str]]:
    names = list(net.inputs)
    feed: dict[str, np.ndarray] = {}
    if not specs:
        rng = np.random.default_rng(seed)
        feed = {n: _random_input(net.values[n], rng) for n in names}
        return feed, [f"random (seed {seed})"] * len(names)
    where: dict[str, str] = {}
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
    for n, p in pairs:
        feed[n] = _load_npy(p)
        where[n] = p
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


def _print_placement(sess: Session) -> None:
    """Where each operator ran, and what the NPU backends did."""
    bindings = sess.backend_bindings()
    for unit in sess.execution_units():
        text = unit.describe()
        if not text.endswith(type(bindings[unit.op_id]).__name__):
            text += f" on {type(bindings[unit.op_id]).__name__}"
        print(f"  {text}")
    for b in sess.backends:
        stats = getattr(b, "last_stats", None)
        if stats is None:
            continue
        print(
            f"{type(b).__name__}: {len(b.launches)} launch(es); last: {stats.busy_cycles} "
            f"cycles, MAC array busy {100.0 * stats.mac_utilisation:.1f}% of them"
        )


def _devices(types: list[type[Backend]], device: Device | None) -> list[Device | None]:
    """The device of each backend: `device` for NPU backends; host backends take it only
    when it is a host device (``host://?capacity=...``), else the default host device."""
    out: list[Device | None] = []
    for t in types:
        if t.is_host:
            out.append(device if isinstance(device, HostDevice) else None)
        else:
            out.append(device)
    return out


def _print_output(name: str, arr: np.ndarray, t: TensorType, n_values: int) -> None:
    print(f"output {name!r}: {t.dtype.manual_name}{list(t.shape)}")
    flat = arr.reshape(-1)
    if flat.size == 0:
        print("  (empty)")
        return
    shown = ", ".join(f"{v:.6g}" if arr.dtype.kind == "f" else str(v) for v in flat[:n_values])
    more = f" ... ({flat.size} values)" if flat.size > n_values else ""
    print(f"  values: [{shown}{more}]")
    a = flat.astype(np.float64)
    print(f"  min {a.min():.6g}  max {a.max():.6g}  mean {a.mean():.6g}")
    classes = arr.shape[-1] if arr.ndim in (1, 2) else 0
    if classes >= 5 and (arr.ndim == 1 or arr.shape[0] == 1):
        top = np.argsort(-a, kind="stable")[:5]
        print("  top-5: " + ", ".join(f"{int(i)} ({a[i]:.6g})" for i in top))


def _run(args: argparse.Namespace) -> int:
    net = _load_network(args.model)
    if args.quantize:
        from xrt.quant import calibrate, quantize_network

        if args.calib < 1:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"--calib must be >= 1, got {args.calib}")
        if args.calib_dir is not None:
            samples = _calibration_dir(net, args.calib_dir)
        else:
            samples = [_inputs(net, [], args.seed + 1000 + i)[0] for i in range(args.calib)]
        with progress(f"calibrating on {len(samples)} input sets"):
            net = quantize_network(net, ranges=calibrate(net, samples))
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    if not names:
        raise XrtError(ErrorCode.OUT_OF_RANGE, "--backends names no backend")
    types = [get_backend_type(n) for n in names]
    feed, sources = _inputs(net, args.input, args.seed)
    device = Device.open(args.device) if args.device else None
    try:
        return _forward(args, net, names, types, device, feed, sources)
    finally:
        if device is not None:
            device.close()


def _forward(
    args: argparse.Namespace,
    net: Network,
    names: list[str],
    types: list[type[Backend]],
    device: Device | None,
    feed: dict[str, np.ndarray],
    sources: list[str],
) -> int:
    sess = Session.create(types, net, _devices(types, device))
    with sess:
        with progress(f"applying the network to {', '.join(names)}"):
            sess.apply()
        sess.enable_time_profile(args.profile)
        sess.enable_trace(args.trace is not None)
        with progress("running forward"):
            outs = sess.forward(feed)
        if args.trace is not None:
            sess.write_trace(args.trace)
        print(
            f"model {args.model}: network {net.name!r}, {len(net.ops)} ops; "
            f"backends {', '.join(names)}"
        )
        for n, src in zip(net.inputs, sources, strict=True):
            t = net.values[n]
            print(f"input {n!r}: {t.dtype.manual_name}{list(t.shape)} from {src}")
        for name, t in zip(sess.outputs, outs, strict=True):
            _print_output(name, t.numpy(), net.values[name], max(args.values, 0))
        if any(not b.is_host for b in sess.backends):
            print("placement:")
            _print_placement(sess)
        print(f"forward: {sess.total_time() * 1e3:.3f} ms")
        if args.profile:
            print(sess.profile_table())
            print(sess.memory_plan.summary())
        if args.trace is not None:
            print(f"trace: {args.trace} ({len(sess.trace_events())} events; ui.perfetto.dev)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``xrt`` command with `argv` (default: ``sys.argv[1:]``); returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0) if isinstance(exc.code, int | None) else 2
    try:
        if args.command == "run":
            return _run(args)
    except XrtError as exc:
        print(f"xrt {args.command}: error {exc}", file=sys.stderr)
        return 2 if exc.code in _INPUT_ERRORS else 1
    except BrokenPipeError:
        # The reader went away (``xrt run ... | head``); as the Python docs advise, point
        # stdout at devnull so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 2  # pragma: no cover - argparse requires a known command


if __name__ == "__main__":
    sys.exit(main())
