"""`npu-emu`: the emulator's command line.

npu-emu serve [--host 127.0.0.1] [--port 50051] [--target buyi|zg330] [--devices N]
              [--token TOKEN] [--lease-ttl SECONDS] [--watchdog SECONDS]
npu-emu build [--target buyi|zg330]
"""

from __future__ import annotations

import argparse
import os
import sys

from xrt._generated.hwconfig import TARGETS

__all__ = ["main"]


def _positive(kind: type, name: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, not {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be positive, not {text}")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="npu-emu", description="Simulated NPU device server.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="host simulated NPUs over gRPC")
    s.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    s.add_argument("--port", type=int, default=50051, help="port (0: any free port)")
    s.add_argument("--target", choices=sorted(TARGETS), default="buyi")
    s.add_argument(
        "--devices",
        type=_positive(int, "--devices"),
        default=1,
        help="number of devices (one simulation process each)",
    )
    s.add_argument(
        "--token",
        default=os.environ.get("NPU_EMU_TOKEN"),
        help="require 'authorization: Bearer TOKEN' (default: $NPU_EMU_TOKEN)",
    )
    s.add_argument(
        "--lease-ttl",
        type=_positive(float, "--lease-ttl"),
        default=30.0,
        help="seconds a lease lives without a call or keep-alive (default 30)",
    )
    s.add_argument(
        "--watchdog",
        type=_positive(float, "--watchdog"),
        default=30.0,
        help="seconds a simulation worker may take beyond a request's own time before it is "
        "declared hung and restarted (default 30)",
    )
    b = sub.add_parser("build", help="build (or check the cache of) the verilated model")
    b.add_argument("--target", choices=sorted(TARGETS), default="buyi")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "build":
        from npuemu.sim.build import build_npu_sim

        m = build_npu_sim(args.target)
        how = f"built in {m.seconds:.1f} s" if m.built_now else "cached"
        print(f"{args.target}: {m.build_dir} ({how})")
        return 0
    if not 0 <= args.port <= 65535:
        print(f"npu-emu: --port {args.port} is not a port number", file=sys.stderr)
        return 2
    from npuemu.server.app import ServeOptions, run

    return run(
        ServeOptions(
            args.host,
            args.port,
            args.target,
            args.devices,
            args.token,
            args.lease_ttl,
            args.watchdog,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
