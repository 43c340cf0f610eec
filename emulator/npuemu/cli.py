"""`npu-emu`: the emulator's command line.

npu-emu serve [--host 127.0.0.1] [--port 50051] [--target buyi|zg330] [--devices N]
              [--token-file PATH] [--lease-ttl SECONDS] [--watchdog SECONDS]
              [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM]] [--allow-insecure-remote]
              (token: $NPU_EMU_TOKEN or --token-file; --token on argv is readable by all users)
npu-emu build [--target buyi|zg330]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
        default=None,
        help="require 'authorization: Bearer TOKEN'. Avoid: every local user can read a "
        "command line (/proc/PID/cmdline); prefer $NPU_EMU_TOKEN or --token-file",
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
    sec = s.add_argument_group("security (token, TLS)")
    sec.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="read the token from this file (first line); the default token is $NPU_EMU_TOKEN",
    )
    sec.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate chain: serve TLS")
    sec.add_argument("--tls-key", type=Path, default=None, help="PEM private key of --tls-cert")
    sec.add_argument(
        "--tls-client-ca",
        type=Path,
        default=None,
        help="PEM CA bundle: require client certificates signed by it (mutual TLS)",
    )
    sec.add_argument(
        "--allow-insecure-remote",
        action="store_true",
        help="serve a non-loopback address with neither token nor TLS (anyone who can reach "
        "the port may use the devices)",
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
    from npuemu.server.security import SecurityError, security_options

    try:
        sec = security_options(
            host=args.host,
            token=args.token,
            token_file=args.token_file,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_client_ca=args.tls_client_ca,
            allow_insecure_remote=args.allow_insecure_remote,
        )
    except SecurityError as exc:
        print(f"npu-emu: {exc}", file=sys.stderr)
        return 2
    return run(
        ServeOptions(
            args.host,
            args.port,
            args.target,
            args.devices,
            sec.token,
            args.lease_ttl,
            args.watchdog,
            sec.tls,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
