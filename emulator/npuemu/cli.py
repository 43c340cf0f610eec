"""`npu-emu`: the emulator's command line.

npu-emu serve [--host 127.0.0.1] [--port 50051] [--target buyi|zg330] [--devices N]
              (--target defaults to $NPU_EMU_TARGET, else buyi)
              [--token-file PATH] [--lease-ttl SECONDS] [--watchdog SECONDS]
              [--drain SECONDS] [--shutdown-grace SECONDS]
              [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM]] [--allow-insecure-remote]
              (token: $NPU_EMU_TOKEN or --token-file; --token on argv is readable by all users)
              [--admin-token-file PATH]   (observers; or $NPU_EMU_ADMIN_TOKEN_FILE)
              [--memory-dir DIR] [--log-dir DIR] [--log-level LEVEL] [--log-format text|json]
              [--metrics-port PORT]   (Prometheus /metrics: docs/deploy.md)
              [--waves DIR] [--trace-registers FILE] [--warm CHECKPOINT]
              [--checkpoint-key-file FILE] [--allow-foreign-checkpoints]
              [--record DIR [--record-max-mib MIB] [--record-keep-mib MIB]]
              [--port-file FILE]   (its URL, written 0600 once the devices are ready)
npu-emu wait [--device URL | --port-file F] [--timeout S]  (0: a device is free; 5: timed out)
npu-emu replay REC [--target buyi|zg330] [--check] [--waves START:END [--out F.fst]] [--list]
              [--max-cycles N] [--max-wall-s S]
              (a recorded lease again, in-process: npuemu.replay, npuemu.replay_waves)
npu-emu build [--target buyi|zg330] [--waves]
npu-emu checkpoint save|restore -d URL FILE | info FILE   (npuemu.device_cli)
npu-emu attach -d URL -- PROGRAM [ARGS...]   (a C driver against a leased device: npuemu.attach)
npu-emu devices | regs | mem | waves | health ...   (npuemu.device_cli)

Every command that talks to a device or server takes it as ``--device/-d URL``
(`xrt.cli_device`; default $XRT_DEVICE); every command that prints a result takes ``--json``,
and prints an error under it as ``{"error": {"code": ..., "message": ...}}``
(`xrt.cli_output`); the exit status is `xrt.exitcodes`' (docs/debugging.md).
npu-emu --version
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from npuemu import __version__
from npuemu.cli_common import CliError, add_json_option, emit
from npuemu.debug_cli import add_debug_command
from npuemu.device_cli import add_device_commands, run_device_command
from npuemu.server.recording import DEFAULT_KEEP_MIB, DEFAULT_MAX_MIB
from xrt import exitcodes
from xrt.cli_device import (
    DEFAULT_SERVER_URL,
    SERVER_SCHEMES,
    add_device_option,
    check_device_url,
    device_from_args,
)
from xrt.cli_output import CliParser, parse_or_report, report_error
from xrt.errors import XrtError
from xrt.hw.targets import TARGETS

__all__ = ["main"]


def _positive(kind: type, name: str, *, zero: bool = False):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, not {text!r}") from None
        if not (value >= 0 if zero else value > 0) or value != value:
            what = "zero or more" if zero else "positive"
            raise argparse.ArgumentTypeError(f"{name} must be {what}, not {text}")
        return value

    return parse


def _default_target() -> str:
    """``$NPU_EMU_TARGET`` (the container image sets it to the target it was built for),
    else buyi. A value that names no target is left to argparse's choices check."""
    return os.environ.get("NPU_EMU_TARGET") or "buyi"


class HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except when there is none, when the help already
    says it, or when it comes from the environment (a token must not be printed)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False) or "default" in text or "$" in text:
            return text
        return super()._get_help_string(action)


def _parser() -> argparse.ArgumentParser:
    fmt = HelpWithDefaults
    p = CliParser(prog="npu-emu", description="Simulated NPU device server.", formatter_class=fmt)
    p.add_argument("--version", action="version", version=f"npu-emu {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="host simulated NPUs over gRPC", formatter_class=fmt)
    s.add_argument(
        "--host", default="127.0.0.1", help="address to bind (127.0.0.1: this machine only)"
    )
    s.add_argument("--port", type=int, default=50051, help="port (0: any free port)")
    s.add_argument(
        "--port-file",
        type=Path,
        metavar="FILE",
        default=None,
        help="once the devices are ready, write the server's URL (grpc://HOST:PORT) into FILE "
        "(mode 0600, atomically: a reader never sees half of it); removed at shutdown",
    )
    s.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default=_default_target(),
        help="the NPU to simulate (default $NPU_EMU_TARGET, else buyi)",
    )
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
        help="seconds a lease lives without a call or keep-alive",
    )
    s.add_argument(
        "--watchdog",
        type=_positive(float, "--watchdog"),
        default=30.0,
        help="seconds a simulation worker may take beyond a request's own time before it is "
        "declared hung and restarted",
    )
    s.add_argument(
        "--drain",
        type=_positive(float, "--drain", zero=True),
        default=1.0,
        help="seconds between health turning NOT_SERVING at SIGTERM/SIGINT and new calls "
        "being refused (calls are still served meanwhile; a second signal ends it)",
    )
    s.add_argument(
        "--shutdown-grace",
        type=_positive(float, "--shutdown-grace", zero=True),
        default=5.0,
        help="seconds calls in flight at shutdown may take to finish; then they are stopped "
        "and fail with UNAVAILABLE (a third signal ends it)",
    )
    sec = s.add_argument_group("security (token, TLS)")
    sec.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="read the token from this file (first line); the default token is $NPU_EMU_TOKEN",
    )
    sec.add_argument(
        "--admin-token-file",
        type=Path,
        default=None,
        help="let operators with this token (the file's first line; default: the file "
        "$NPU_EMU_ADMIN_TOKEN_FILE names) observe held devices: read their registers and "
        "record waveform windows without the lease (docs/debugging.md). Without it nobody "
        "can observe",
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
    _add_storage_and_debug_options(s)
    b = sub.add_parser(
        "build", help="build (or check the cache of) the verilated model", formatter_class=fmt
    )
    b.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default=_default_target(),
        help="the NPU to build (default $NPU_EMU_TARGET, else buyi)",
    )
    b.add_argument("--waves", action="store_true", help="the traced model (serve --waves)")
    b.add_argument(
        "--pgo",
        action="store_true",
        help="also take a gcc profile (an instrumented build and a short workload: about "
        "three cold builds) and rebuild with it: about a fifth more simulated cycles per "
        "second; later builds of this model use the profile until the RTL changes",
    )
    add_json_option(b, "the model's folder and whether it was built")
    add_device_commands(sub, fmt)
    add_debug_command(sub, fmt)
    wt = sub.add_parser(
        "wait",
        help="wait until a device of a server can be leased (exit 0), or time out (exit 5)",
        formatter_class=fmt,
    )
    add_device_option(
        wt, help="the server or device: grpc://HOST:PORT[/DEVICE] (default $XRT_DEVICE)"
    )
    add_json_option(wt, "the device found")
    wt.add_argument(
        "--port-file",
        type=Path,
        metavar="FILE",
        default=None,
        help="wait for this file of `serve --port-file` to appear, then for a device at the "
        "URL it holds",
    )
    wt.add_argument(
        "--timeout",
        type=_positive(float, "--timeout", zero=True),
        default=60.0,
        help="seconds to wait",
    )
    a = sub.add_parser(
        "attach",
        help="run a program (a C driver) with a device leased to it: its registers through "
        "the register ring, udma mapped (the server must be on this machine)",
        description="npu-emu attach --device URL -- PROGRAM [ARGS...]: see npuemu.attach",
        formatter_class=fmt,
    )
    add_device_option(
        a,
        help="the device: grpc://HOST:PORT[/DEVICE][?token=...] (default $XRT_DEVICE, else "
        "grpc://127.0.0.1:50051)",
    )
    a.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[:ARG...][@TRIGGER]",
        help="arm a fault in the simulated NPU before PROGRAM starts (repeatable; as xrt run "
        "--fault; docs/debugging.md)",
    )
    a.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    r = sub.add_parser(
        "replay",
        help="run a recorded lease (serve --record) or board session (axi://...&record=FILE) "
        "again on a fresh simulated device",
        formatter_class=fmt,
    )
    r.add_argument(
        "recording",
        type=Path,
        help="the recording file (a board's: values compared, not cycles)",
    )
    r.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default=None,
        help="replay on this target even when the recording was made for another one or "
        "with another model (default: the recording's; divergence is then reported)",
    )
    r.add_argument(
        "--check",
        action="store_true",
        help="compare every response with the recorded one: exit 0 and 'bit-exact', or 4 "
        "naming the first diverging request",
    )
    r.add_argument(
        "--waves",
        metavar="START:END",
        default=None,
        help="write an FST of that window of cycles (counted from the lease's first request, "
        "as the replay prints them), starting from the recording's nearest checkpoint "
        "before START when it has one",
    )
    r.add_argument(
        "--list",
        action="store_true",
        help="print the recorded requests (index, cycles they started and ended at, what "
        "they asked) and exit: where to point --waves",
    )
    r.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the FST file of --waves (default: the recording's name with .fst, here; "
        "written 0600)",
    )
    add_json_option(r, "the replay's summary (or --list's requests)")
    # The replay's budget (npuemu.replay_checks): a recording is input from anyone.
    r.add_argument(
        "--max-cycles",
        type=_positive(int, "--max-cycles"),
        default=None,
        help="simulated cycles the replay may run (default 2**30: 10.7 simulated seconds); "
        "a recording that needs more is refused, or stopped where it runs out",
    )
    r.add_argument(
        "--max-wall-s",
        type=_positive(float, "--max-wall-s"),
        default=None,
        help="wall-clock seconds the replay may take (default 3600)",
    )
    return p


def _add_storage_and_debug_options(s: argparse.ArgumentParser) -> None:
    """Where files go and how to look inside (issue 14): their own groups."""
    files = s.add_argument_group("files")
    files.add_argument(
        "--memory-dir",
        type=Path,
        default=None,
        help="folder of the device memory files (default /dev/shm; the temporary folder, "
        "with a warning, when /dev/shm is too small)",
    )
    files.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="folder of the worker logs, kept (default: a new folder under the temporary "
        "folder, printed at start, removed at a clean shutdown unless a worker crashed)",
    )
    debug = s.add_argument_group("debugging")
    debug.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="server log level",
    )
    debug.add_argument(
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="server log lines as text, or as one JSON object per line (time, level, "
        "logger, message, exception) for log collectors",
    )
    debug.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        default=None,
        help="serve Prometheus metrics at http://HOST:PORT/metrics (HOST: --host; 0: any "
        "free port, printed at start): devices, leases, refused opens, requests by method "
        "and status, simulated cycles, worker restarts, the model's build time",
    )
    waves_default = os.environ.get("WAVES", "0") not in ("", "0")
    debug.add_argument(
        "--waves",
        type=Path,
        metavar="DIR",
        default=Path("build/waves") if waves_default else None,
        help="serve the traced model and write waveform windows (StartWaves/StopWaves) "
        "as FST files into DIR (WAVES=1: build/waves)",
    )
    debug.add_argument(
        "--warm",
        type=Path,
        metavar="CHECKPOINT",
        default=None,
        help="start every lease from this checkpoint's state instead of the boot state "
        "(npu-emu checkpoint save; Device.checkpoint): a test suite boots the device once. "
        "Its model state must be sealed by this server's key (--checkpoint-key-file)",
    )
    debug.add_argument(
        "--checkpoint-key-file",
        type=Path,
        metavar="FILE",
        default=None,
        help="seal checkpoints with the key in FILE (32+ random bytes, mode 0600), and "
        "restore whole only those sealed with it: the servers of a farm share one "
        "(default: a key of this server process's own)",
    )
    debug.add_argument(
        "--allow-foreign-checkpoints",
        action="store_true",
        help="restore model states this server did not seal (a single user's own server: "
        "a crafted model state can steer the device of every later holder)",
    )
    debug.add_argument(
        "--trace-registers",
        type=Path,
        metavar="FILE",
        default=None,
        help="log every register access (cycle, device, address, name, value) to FILE "
        "('-': stderr)",
    )
    debug.add_argument(
        "--lockstep",
        action="store_true",
        help="check every launch of every device's compute engine against the golden model "
        "(docs/verification.md): a divergence is an engine error (XrtError 11014 naming "
        "'lockstep'); register rings then run through the simulator's Python port",
    )
    debug.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        default=None,
        help="record every lease (each request, its data and response) into a file in DIR, "
        "for `npu-emu replay` (register rings are recorded too; memory is not mapped, local "
        "clients read and write it through the server)",
    )
    debug.add_argument(
        "--no-server-ring",
        action="store_true",
        help="send remote clients' register requests through the simulator's Python port "
        "instead of the server's register ring (the route before it: for comparisons)",
    )
    debug.add_argument(
        "--register-master",
        choices=("regbus", "cocotbext"),
        default="regbus",
        help="the simulation's register bus master: the RTL one (default) or cocotbext-axi's "
        "(the independent reference, for benches; slower, and no register rings)",
    )
    debug.add_argument(
        "--record-max-mib",
        type=_positive(int, "--record-max-mib"),
        default=DEFAULT_MAX_MIB,
        help="cap of one recording: past it the recording is cut (a 'truncated' record)",
    )
    debug.add_argument(
        "--record-keep-mib",
        type=_positive(int, "--record-keep-mib"),
        default=DEFAULT_KEEP_MIB,
        help="budget of the --record folder: past it the oldest finished recordings are deleted",
    )


def main(argv: list[str] | None = None) -> int:
    """Run ``npu-emu`` with `argv`; returns the exit code (the table of `xrt.exitcodes`)."""
    # gRPC's C core logs to stderr on its own (TLS handshakes, ports); our messages say
    # what failed. GRPC_VERBOSITY set by the user wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # a CI log sees each line as it comes
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_or_report(_parser(), argv)
    if isinstance(args, int):
        return args
    prog = f"npu-emu {args.command}"
    as_json = getattr(args, "json", False)
    try:
        return _main(args)
    except CliError as exc:
        return report_error(prog, exitcodes.BAD_INPUT, str(exc), as_json=as_json)
    except XrtError as exc:
        return report_error(prog, exitcodes.for_error(exc), exc, as_json=as_json)
    except KeyboardInterrupt:
        return report_error(prog, exitcodes.INTERRUPTED, "interrupted", as_json=as_json)
    except BrokenPipeError:
        return exitcodes.quiet_broken_pipe()


def _main(args: argparse.Namespace) -> int:
    if getattr(args, "target", None) not in (None, *TARGETS):  # a bad $NPU_EMU_TARGET default
        known = ", ".join(sorted(TARGETS))
        print(f"npu-emu: NPU_EMU_TARGET={args.target!r} names no target ({known})", file=sys.stderr)
        return exitcodes.BAD_INPUT
    if args.command == "replay":
        from npuemu.replay_checks import Budget
        from npuemu.replay_cli import main as replay_main

        return replay_main(
            args.recording,
            args.target,
            check=args.check,
            waves=args.waves,
            out=args.out,
            listing=args.list,
            as_json=args.json,
            budget=Budget(
                args.max_cycles or Budget.max_cycles, args.max_wall_s or Budget.max_wall_s
            ),
        )
    if args.command == "debug":
        from npuemu.debug_cli import main as debug_main

        return debug_main(args)
    if args.command == "wait":
        from npuemu.wait_cli import wait_for_device

        if args.device:
            check_device_url(args.device, schemes=SERVER_SCHEMES)
        return wait_for_device(
            args.device, args.timeout, port_file=args.port_file, as_json=args.json
        )
    if args.command == "attach":
        from npuemu.attach import main as attach_main

        command, legacy = args.program, None
        if command[:1] != ["--"] and command and "://" in command[0]:
            legacy, command = command[0], command[1:]  # attach URL -- PROGRAM (deprecated)
        command = command[1:] if command[:1] == ["--"] else command
        url = device_from_args(args, "npu-emu attach", name=legacy, server_default=True)
        return attach_main(url or DEFAULT_SERVER_URL, command, args.fault)
    if args.command == "build":
        from npuemu.sim.build import ModelBuildError, build_npu_sim

        if args.pgo and args.waves:
            message = "--pgo profiles the untraced model: drop --waves"
            return report_error("npu-emu build", exitcodes.BAD_INPUT, message, as_json=args.json)
        try:
            if args.pgo:
                from npuemu.sim.pgo import take_profile

                m = take_profile(args.target)
            else:
                m = build_npu_sim(args.target, waves=args.waves)
        except ModelBuildError as exc:
            return report_error("npu-emu build", exitcodes.FAILED, str(exc), as_json=args.json)
        how = f"built in {m.seconds:.1f} s" if m.built_now else "cached"
        doc = {
            "target": args.target,
            "build_dir": str(m.build_dir),
            "built_now": m.built_now,
            "seconds": m.seconds,
        }
        emit(args, doc, [f"{args.target}: {m.build_dir} ({how})"])
        return 0
    handled = run_device_command(args)
    if handled is not None:
        return handled
    if not 0 <= args.port <= 65535:
        print(f"npu-emu: --port {args.port} is not a port number", file=sys.stderr)
        return exitcodes.BAD_INPUT
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        print(f"npu-emu: --metrics-port {args.metrics_port} is not a port number", file=sys.stderr)
        return exitcodes.BAD_INPUT
    if args.port_file is not None and not args.port_file.parent.is_dir():
        print(
            f"npu-emu: --port-file {args.port_file}: no folder {args.port_file.parent}",
            file=sys.stderr,
        )
        return exitcodes.BAD_INPUT
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
            admin_token_file=args.admin_token_file,
        )
    except SecurityError as exc:
        print(f"npu-emu: {exc}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    for warning in sec.warnings:
        print(f"npu-emu: warning: {warning}", file=sys.stderr)
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
            memory_dir=args.memory_dir,
            log_dir=args.log_dir,
            log_level=args.log_level,
            waves_dir=args.waves,
            register_trace=args.trace_registers,
            lockstep=args.lockstep,
            server_ring=not args.no_server_ring,
            register_master=args.register_master,
            warm=args.warm,
            checkpoint_key_file=args.checkpoint_key_file,
            allow_foreign_checkpoints=args.allow_foreign_checkpoints,
            record_dir=args.record,
            record_max_bytes=args.record_max_mib << 20,
            record_keep_bytes=args.record_keep_mib << 20,
            admin_token=sec.admin_token,
            drain_s=args.drain,
            grace_s=args.shutdown_grace,
            port_file=args.port_file,
            metrics_port=args.metrics_port,
            log_format=args.log_format,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
