"""``xrt compile``: load (and quantize) a model, compile it for a target without any device,
write the program container, and say what it holds.

The container is written only when compiling succeeded (and, with ``--require-npu``, when
every quantized operator went to the NPU); what is printed is read back from the written
file (`xrt.aic.Qpc`), so it is what a loader will see.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from xrt import exitcodes
from xrt._model_input import check_npu_gets_integers, load_network, quantize
from xrt.aic import Qpc
from xrt.cli_output import error_document
from xrt.errors import ErrorCode, XrtError
from xrt.progress import progress
from xrt.session.container import compile_session, npu_backend_type
from xrt.session.snapshot import is_snapshot_file

__all__ = ["compile_command"]


def compile_command(args: argparse.Namespace) -> int:
    """The ``xrt compile`` command (arguments as `xrt.cli` parses them); returns the exit code."""
    npu = npu_backend_type(args.target)
    out = Path(args.output)
    if not out.parent.is_dir():
        raise XrtError(ErrorCode.FILE_NOT_FOUND, f"folder {str(out.parent)!r} does not exist")
    if is_snapshot_file(args.model):
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{args.model} is a program container already; compile the model it came from",
        )
    net = load_network(args.model)
    quant = None
    if args.quantize:
        net, quant = quantize(net, args)
    check_npu_gets_integers(net, [npu], quantized=args.quantize)
    with progress(f"compiling {net.name} for {args.target} (no device)"):
        sess = compile_session(net, args.target)
    with sess:
        report = sess.placement()
        if args.require_npu and report.host_quantized:
            why = (
                f"--require-npu: {len(report.host_quantized)} quantized operator(s) stay on "
                f"the host; {out} not written"
            )
            if args.json:
                doc = error_document(exitcodes.PLACEMENT, why)
                print(json.dumps({**report.to_dict(), **doc}))
            for line in report.summary_lines():
                print(line, file=sys.stderr)
            print(f"xrt compile: {why}", file=sys.stderr)
            return exitcodes.PLACEMENT
        sess.dump_snapshot(out)
    info = Qpc.from_file(out).info()
    if args.json:
        doc = {"model": args.model, "output": str(out), "bytes": out.stat().st_size}
        if quant is not None:
            doc["quantizer"] = quant.to_dict()
        print(json.dumps({**doc, **info.to_dict()}, indent=1))
    else:
        print(f"model {args.model} -> {out} ({out.stat().st_size} bytes)")
        if quant is not None:
            print(f"quantizer: {quant.line()}")
        for line in info.summary_lines():
            print(line)
    return exitcodes.OK
