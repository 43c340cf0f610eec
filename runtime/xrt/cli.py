"""The ``xrt`` command: ``xrt run MODEL`` runs a model through a `xrt.session.Session`;
``xrt compile MODEL`` compiles one for a target without a device into a program container.

::

    xrt run MODEL.onnx|CONTAINER [--device/-d URL] [--backends NAME[,NAME...]]
                       [--input FILE.npy ...] [--seed N] [--quantize [--calib N | --calib-dir DIR]]
                       [--require-npu] [--compare host|onnxruntime [--atol A] [--rtol R]]
                       [--output FILE.npz] [--runs N]
                       [--json] [--profile] [--trace FILE] [--values N]
                       [--tuning-records FILE [--tune [--tune-measure rtl|cost-model]]]
    xrt compile MODEL.onnx --target buyi|zg330 -o FILE [--quantize [--calib N | --calib-dir DIR]]
                       [--seed N] [--require-npu] [--json]

MODEL is an ONNX file (imported with `Network.from_onnx`) or a network file of
docs/network-format.md (``.json``, with its ``.raw`` next to it). Without ``--input`` every
input gets seeded random values (normal for floats, uniform over the type for integers).
``--input`` takes one ``.npy`` file per network input, in order, or ``NAME=FILE.npy``.

With ``--device URL`` the device is opened first (a wrong URL fails at once, before the
model is imported or calibrated) and, without ``--backends``, that device's NPU backend
runs what it can and the host the rest. Without ``--device``, a run with work for an NPU
(``--quantize``, a quantized network, ``--backends`` naming an NPU backend) uses the
default device: ``$XRT_DEVICE``, else ``sim://buyi`` (``sim://zg330`` for ZG330 work), a
simulated NPU private to the run (no server to start); ``--device host://`` keeps
everything on the host. Every run
prints where its operators ran and, for each quantized operator left on the host, why;
``--require-npu`` makes that a failure. ``--quantize`` calibrates on ``--calib`` random
input sets (or ``--calib-dir``) and runs the int8 network (docs/quantization.md). A
program container (recognised by its content) runs as compiled: no quantizing, no
compiling.

``xrt compile`` quantizes, binds and compiles as ``xrt run --device`` would on a device of
``--target``, without one, and writes the program container (docs/session.md, "Program
containers"); it prints the placement, the number of NPU programs and the buffer mappings.

Exit status (one table for ``xrt`` and ``npu-emu``, `xrt.exitcodes`): 0 success; 1 running
failed (11012..11015); 2 bad arguments or input (11002, 11003, 11010, 11011); 3
``--require-npu`` found quantized operators on the host; 4 ``--compare`` found a
difference; 130 interrupted (Ctrl-C); 141 the output pipe closed.
With ``--json`` an error is ``{"error": {"code": ..., "message": ...}}`` on stdout
(`xrt.cli_output`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from xrt import exitcodes
from xrt._compare_onnx import DEFAULT_ATOL, DEFAULT_RTOL
from xrt._interrupt import sigint_caught
from xrt.cli_device import add_device_option, check_device_url
from xrt.cli_output import CliParser, parse_or_report, report_error
from xrt.errors import XrtError

__all__ = ["main"]


class _HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except None/False ones and those the help already states."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("npu-emu")
    except PackageNotFoundError:
        return "0+unknown"


def _fault_arg(text: str) -> str:
    """``--fault``: checked when the arguments are (a typo fails before any work)."""
    from xrt.npu_device.faults import parse_fault

    try:
        return parse_fault(text).spec
    except XrtError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _parser() -> argparse.ArgumentParser:
    from xrt.npu_device.faults import FAULT_KINDS

    parser = CliParser(
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
    run.add_argument(
        "model", help="ONNX model, xrt network file (.json) or program container (xrt compile)"
    )
    add_device_option(
        run,
        help="device URL (sim://buyi, grpc://HOST:PORT[/DEVICE], labgrid://PLACE, axi://..., "
        "host://): opened first; without --backends its NPU backend runs what it can, the "
        "host the rest (default: $XRT_DEVICE, else sim://buyi, when there is NPU work)",
    )
    run.add_argument(
        "--record",
        metavar="FILE",
        default=None,
        help="record the board session (an axi:// --device) into FILE, for `npu-emu replay "
        "FILE --check` on the emulator (the URL's record=FILE)",
    )
    run.add_argument(
        "--backends",
        default=None,
        help="comma-separated backend names, highest priority first (default: the "
        "device's NPU backend and host, or host alone on host:// or a float model)",
    )
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="FILE.npy",
        help="an input array (.npy); repeat per network input, or NAME=FILE.npy",
    )
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    _quantize_args(run)
    ci = run.add_argument_group("CI")
    ci.add_argument(
        "--require-npu",
        action="store_true",
        help="exit 3 when any quantized operator stays on the host (each listed with why)",
    )
    ci.add_argument(
        "--fault",
        action="append",
        default=[],
        type=_fault_arg,
        metavar="KIND[:ARG...][@TRIGGER]",
        help="arm a fault in the simulated NPU before the first forward (repeatable; "
        "kinds: " + ", ".join(FAULT_KINDS) + "; docs/debugging.md)",
    )
    ci.add_argument(
        "--compare",
        choices=("host", "onnxruntime"),
        default=None,
        help="host: run the same network on the host backend too and check the outputs are "
        "bit-exact; onnxruntime: run the ONNX model in onnxruntime (the float reference) "
        "and check every output within --atol/--rtol (exit 4 naming the first differing "
        "element otherwise)",
    )
    ci.add_argument(
        "--atol",
        type=float,
        default=None,
        help=f"--compare onnxruntime: absolute tolerance (default {DEFAULT_ATOL:g})",
    )
    ci.add_argument(
        "--rtol",
        type=float,
        default=None,
        help=f"--compare onnxruntime: relative tolerance (default {DEFAULT_RTOL:g}); an "
        "element passes when |got - expected| <= atol + rtol * |expected|",
    )
    ci.add_argument(
        "--output", metavar="FILE.npz", default=None, help="save every output, by name (.npz)"
    )
    ci.add_argument(
        "--runs", type=int, default=1, help="forwards to run (p50/p99 of the wall time)"
    )
    ci.add_argument(
        "--json", action="store_true", help="print the summary as one JSON document instead"
    )
    look = run.add_argument_group("looking inside")
    look.add_argument(
        "--profile",
        action="store_true",
        help="print where each unit ran, the per-operator time table and the memory plan",
    )
    look.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="write the forward's timeline as Chrome trace JSON (open it in ui.perfetto.dev)",
    )
    look.add_argument("--values", type=int, default=8, help="values printed per output (default 8)")
    tune = run.add_argument_group("tuning records (docs/session.md)")
    tune.add_argument(
        "--tuning-records",
        metavar="FILE",
        default=None,
        help="compile with the tilings and kernels recorded in FILE (JSON); stale, foreign "
        "or illegal records are ignored with a note",
    )
    tune.add_argument(
        "--tune",
        action="store_true",
        help="measure what FILE has no trusted record for at apply, and save FILE",
    )
    tune.add_argument(
        "--tune-measure",
        choices=("rtl", "cost-model"),
        default="rtl",
        help="what --tune measures NPU tilings on: the device's RTL cycles, or the golden "
        "model's cost model",
    )
    _compile_parser(sub)
    return parser


def _quantize_args(parser: argparse.ArgumentParser) -> None:
    """``--quantize``, ``--calib``, ``--calib-dir``: the same for run and compile."""
    q = parser.add_argument_group("quantization")
    q.add_argument(
        "--quantize", action="store_true", help="quantize to int8 (random calibration data)"
    )
    q.add_argument(
        "--calib", type=int, default=8, help="calibration input sets for --quantize (default 8)"
    )
    q.add_argument(
        "--calib-dir",
        default=None,
        metavar="DIR",
        help="calibrate --quantize on the .npy files in DIR (one per input set, sorted by "
        "name; a single-input network) instead of random data",
    )


def _compile_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    comp = sub.add_parser(
        "compile",
        help="compile a model for a target, without a device, into a program container",
        description="Quantize, bind and compile MODEL for --target without any device, and "
        "write the program container (a session snapshot: `xrt run CONTAINER --device URL`, "
        "Session.create_with_snapshot and xrt.aic.Qpc load it).",
        formatter_class=_HelpWithDefaults,
    )
    comp.add_argument("model", help="ONNX model or xrt network file (.json)")
    comp.add_argument(
        "--target", required=True, choices=("buyi", "zg330"), help="the NPU to compile for"
    )
    comp.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the program container to write"
    )
    comp.add_argument("--seed", type=int, default=0, help="seed of the random calibration inputs")
    _quantize_args(comp)
    comp.add_argument(
        "--require-npu",
        action="store_true",
        help="exit 3, writing nothing, when any quantized operator stays on the host",
    )
    comp.add_argument(
        "--json", action="store_true", help="print what the container holds as one JSON document"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``xrt`` command with `argv` (default: ``sys.argv[1:]``); returns the exit code."""
    # gRPC's C core logs to stderr on its own (TLS handshakes, ports); the errors we raise
    # say what failed. GRPC_VERBOSITY set by the user wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # a CI log sees each line as it comes
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_or_report(_parser(), argv)
    if isinstance(args, int):
        return args
    prog = f"xrt {args.command}"
    try:
        with sigint_caught():
            if args.command == "run":
                from xrt._run_command import run_command

                if args.device:  # one sentence for a bad URL, before any work
                    check_device_url(args.device)
                return run_command(args)
            if args.command == "compile":
                from xrt._compile_command import compile_command

                return compile_command(args)
    except XrtError as exc:
        return report_error(prog, exitcodes.for_error(exc), exc, as_json=args.json)
    except KeyboardInterrupt:
        return report_error(prog, exitcodes.INTERRUPTED, "interrupted", as_json=args.json)
    except BrokenPipeError:
        return exitcodes.quiet_broken_pipe()
    return exitcodes.BAD_INPUT  # pragma: no cover - argparse requires a known command


if __name__ == "__main__":
    sys.exit(main())
