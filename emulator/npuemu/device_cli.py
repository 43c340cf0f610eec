"""`npu-emu devices|regs|mem|waves`: look at a served device from the shell.

    npu-emu devices                                  # the devices, their state and holder
    npu-emu regs read  npu0 npu.MAGIC                # by name from the generated map
    npu-emu regs read  npu0 dma.STATUS.BUSY          # one field
    npu-emu regs write npu0 npu.SCRATCH 0x1234
    npu-emu regs write npu0 npu.CTRL.SW_IRQ 1        # read-modify-write of that field
    npu-emu regs dump  npu0 [npu|dma]                # every register, fields decoded
    npu-emu mem read   npu0 udma:0x100 64            # hex dump (plddr goes through the DMA)
    npu-emu mem read   npu0 plddr 1048576 --out x.bin
    npu-emu mem write  npu0 udma:0x100 --hex 'de ad be ef' | --in FILE
    npu-emu waves      npu0 --cycles 20000           # record a waveform window (--waves)
    npu-emu health                                   # exit 0 when the server is SERVING
    npu-emu checkpoint save    npu0 state.npuckpt    # the device's whole state, to a file
    npu-emu checkpoint restore npu0 state.npuckpt
    npu-emu checkpoint info    state.npuckpt         # what a file holds (no server needed)

    npu-emu regs read  npu0 npu.SCRATCH --observe    # a device someone else holds
    npu-emu regs dump  npu0 --observe
    npu-emu waves      npu0 --observe --cycles 20000 [--timeout 60]

Each command opens the device through the `xrt` runtime (``grpc://SERVER/DEVICE``), so it
takes the device's lease for as long as it runs and sees exactly what a driver sees.
`--server` defaults to ``$NPU_EMU_SERVER`` or 127.0.0.1:50051; the token comes from
``$NPU_EMU_TOKEN``. Register names are ``BLOCK.REGISTER[.FIELD]``; the block may be left
out when the register name is unique.

``--observe`` looks at a device held by someone else without taking its lease (an
operator, with the server's admin token in ``$NPU_EMU_ADMIN_TOKEN``;
`xrt.transport.grpc.Observer`): register reads (not those whose read has a side effect)
and waveform windows of the holder's activity; no writes, no memory.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npuemu.cli_common import (
    CliError,
    add_json_option,
    emit,
    open_device,
    open_observer,
)
from npuemu.regs_cli import dump_block_not_device, regs_command
from xrt.cli_device import SERVER_SCHEMES, add_device_option, device_from_args
from xrt.errors import ErrorCode, XrtError

if TYPE_CHECKING:
    from xrt.npu_device.npu import NpuDevice

__all__ = ["CliError", "add_device_commands", "run_device_command"]

DEVICE_HELP = (
    "the device, grpc://HOST:PORT/DEVICE (any free one without /DEVICE), or the server, "
    "grpc://HOST:PORT (default $XRT_DEVICE, else grpc://127.0.0.1:50051)"
)
LEGACY_NAME_HELP = "deprecated: the device's name (or URL); say --device grpc://HOST:PORT/NAME"
OBSERVE_HELP = (
    "look at a device someone else holds, without its lease (the server's admin token in "
    "$NPU_EMU_ADMIN_TOKEN; reads only)"
)


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def add_device_commands(sub: argparse._SubParsersAction, formatter: type) -> None:
    """Add the device commands to `npu-emu`'s sub-command parser."""

    def common(p: argparse.ArgumentParser, json_what: str = "the result") -> None:
        add_device_option(p, help=DEVICE_HELP, legacy_server=True)
        add_json_option(p, json_what)

    d = sub.add_parser("devices", help="list a server's devices", formatter_class=formatter)
    common(d, "the listing")

    h = sub.add_parser(
        "health",
        help="exit 0 when the server's gRPC health says SERVING (container health checks)",
        formatter_class=formatter,
    )
    common(h)
    h.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for an answer")

    regs = sub.add_parser(
        "regs", help="read, write or dump registers by name", formatter_class=formatter
    )
    rsub = regs.add_subparsers(dest="regs_command", required=True)
    r = rsub.add_parser("read", help="read a register or a field", formatter_class=formatter)
    r.add_argument("device_name", nargs="?", metavar="DEVICE", help=LEGACY_NAME_HELP)
    r.add_argument("name", help="BLOCK.REGISTER[.FIELD], e.g. npu.MAGIC")
    r.add_argument("--observe", action="store_true", help=OBSERVE_HELP)
    common(r)
    w = rsub.add_parser("write", help="write a register or a field", formatter_class=formatter)
    w.add_argument("device_name", nargs="?", metavar="DEVICE", help=LEGACY_NAME_HELP)
    w.add_argument("name", help="BLOCK.REGISTER[.FIELD]")
    w.add_argument("value", type=_int, help="value (0x.. for hex)")
    common(w)
    dump = rsub.add_parser("dump", help="every register, fields decoded", formatter_class=formatter)
    dump.add_argument("device_name", nargs="?", metavar="DEVICE", help=LEGACY_NAME_HELP)
    dump.add_argument("block", nargs="?", help="npu or dma (default: both)")
    dump.add_argument("--observe", action="store_true", help=OBSERVE_HELP)
    common(dump)

    mem = sub.add_parser("mem", help="read or write device memory", formatter_class=formatter)
    msub = mem.add_subparsers(dest="mem_command", required=True)
    mr = msub.add_parser("read", help="hex dump or save memory", formatter_class=formatter)
    mr.add_argument("device_name", nargs="?", metavar="DEVICE", help=LEGACY_NAME_HELP)
    mr.add_argument("where", help="REGION[:OFFSET] (udma, plddr, ocm) or a physical address")
    mr.add_argument("length", type=_int, help="bytes")
    mr.add_argument("--out", type=Path, help="write the bytes to this file instead")
    common(mr)
    mw = msub.add_parser("write", help="write bytes to memory", formatter_class=formatter)
    mw.add_argument("device_name", nargs="?", metavar="DEVICE", help=LEGACY_NAME_HELP)
    mw.add_argument("where", help="REGION[:OFFSET] or a physical address")
    src = mw.add_mutually_exclusive_group(required=True)
    src.add_argument("--hex", help="bytes as hex, e.g. 'de ad be ef'")
    src.add_argument("--in", dest="infile", type=Path, help="a file's bytes")
    common(mw)

    wv = sub.add_parser(
        "waves",
        help="record a waveform window on a device (server started with --waves)",
        formatter_class=formatter,
    )
    wv.add_argument("device_name", nargs="?", metavar="DEVICE", help=LEGACY_NAME_HELP)
    wv.add_argument(
        "--cycles", type=_int, default=10_000, help="simulated cycles the window runs for"
    )
    wv.add_argument(
        "--signals",
        metavar="PATTERN",
        default="",
        help="only these signals: comma-separated hierarchical names, each a scope whose "
        "signals are kept or one signal (npu_sim.u_npu.u_dma,$rootio.irq_o); default: all",
    )
    wv.add_argument(
        "--observe",
        action="store_true",
        help="record the holder's activity on a device someone else holds (the server's "
        "admin token in $NPU_EMU_ADMIN_TOKEN): the window ends after --cycles of it or at "
        "--timeout",
    )
    wv.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="with --observe: seconds to wait for the holder's activity to fill the window "
        "(the device's time moves only while its holder works); then the window is closed "
        "with what it holds",
    )
    common(wv)

    ck = sub.add_parser(
        "checkpoint",
        help="save a device's whole state to a file, restore it, or describe a file",
        formatter_class=formatter,
    )
    csub = ck.add_subparsers(dest="action", required=True)
    cs = csub.add_parser(
        "save", help="save the device's state into FILE", formatter_class=formatter
    )
    cs.add_argument("device_name", nargs="?", metavar="DEVICE", help=LEGACY_NAME_HELP)
    cs.add_argument("file", type=Path)
    cs.add_argument(
        "--wait-cycles",
        type=_int,
        default=0,
        help="simulated cycles to wait for running engines to finish (0: refuse at once)",
    )
    common(cs)
    cr = csub.add_parser(
        "restore", help="put FILE's state into the device", formatter_class=formatter
    )
    cr.add_argument("device_name", nargs="?", metavar="DEVICE", help=LEGACY_NAME_HELP)
    cr.add_argument("file", type=Path)
    cr.add_argument(
        "--portable",
        action="store_true",
        help="restore only the memories and configuration registers (a file this server "
        "did not seal: another server's, a colleague's)",
    )
    common(cr)
    ci = csub.add_parser("info", help="what a checkpoint file holds", formatter_class=formatter)
    ci.add_argument("file", type=Path)
    add_json_option(ci, "what the file holds")


def _where(dev: NpuDevice, where: str) -> tuple[object, int]:
    """REGION[:OFFSET] or a physical address -> (region, physical address)."""
    name, _, offset = where.partition(":")
    regions = dev.mem_regions
    if name in regions:
        region = regions[name]
        try:
            off = int(offset, 0) if offset else 0
        except ValueError:
            raise CliError(f"{where!r}: offset {offset!r} is not a number") from None
        return region, region.base + off
    try:
        addr = int(where, 0)
    except ValueError:
        raise CliError(f"{where!r}: no region {name!r} ({', '.join(regions)})") from None
    for region in regions.values():
        if region.base <= addr < region.base + region.size:
            return region, addr
    raise CliError(f"address {addr:#x} is in no memory region ({', '.join(regions)})")


def _hexdump(addr: int, data: bytes) -> list[str]:
    lines = []
    for i in range(0, len(data), 16):
        row = data[i : i + 16]
        text = "".join(chr(c) if 32 <= c < 127 else "." for c in row)
        lines.append(f"{addr + i:#012x}  {row.hex(' '):<47}  {text}")
    return lines


def _mem(args: argparse.Namespace) -> int:
    with open_device(args.url) as dev:
        region, addr = _where(dev, args.where)
        if args.mem_command == "read":
            if args.length <= 0:
                raise CliError(f"length must be positive, not {args.length}")
            buf = bytearray(args.length)
            region.read(buf, addr)  # type: ignore[attr-defined]
            doc = {"where": args.where, "address": addr, "length": len(buf)}
            if args.out:
                args.out.write_bytes(buf)
                line = f"{len(buf)} B from {args.where} ({addr:#x}) -> {args.out}"
                emit(args, {**doc, "out": str(args.out)}, [line])
            else:
                emit(args, {**doc, "hex": bytes(buf).hex()}, _hexdump(addr, bytes(buf)))
            return 0
        if args.infile is not None:
            data = args.infile.read_bytes()
        else:
            try:
                data = bytes.fromhex(args.hex)
            except ValueError as exc:
                raise CliError(f"--hex {args.hex!r}: {exc}") from None
        region.write(addr, data)  # type: ignore[attr-defined]
        doc = {"where": args.where, "address": addr, "written": len(data)}
        emit(args, doc, [f"{len(data)} B -> {args.where} ({addr:#x})"])
    return 0


def _channel(url: str):  # -> (grpc.Channel, address, metadata)
    from xrt.transport.grpc.channel import open_channel, parse_url

    target = parse_url(url)
    token = target.token or os.environ.get("NPU_EMU_TOKEN")
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    return open_channel(target.address, target.tls), target.address, metadata


def _devices(args: argparse.Namespace) -> int:
    import grpc

    from xrt.hw.wire import pb, pb_grpc
    from xrt.transport.grpc.errors import rpc_error

    channel, address, metadata = _channel(args.url)
    with channel:
        stub = pb_grpc.DeviceServiceStub(channel)
        try:
            listing = stub.ListDevices(pb.ListDevicesRequest(), timeout=10, metadata=metadata)
        except grpc.RpcError as exc:  # a sentence saying what failed, exit 1 (xrt.exitcodes)
            raise rpc_error(exc, f"listing the devices of {address}") from None
    devices = [
        {
            "name": d.name,
            "target": d.target,
            "hw_version": d.hw_version,
            "state": pb.DeviceState.Name(d.state).removeprefix("DEVICE_STATE_").lower(),
            "holder": d.holder or None,
        }
        for d in listing.devices
    ]
    doc = {
        "server": address,
        "server_version": listing.server_version or None,
        "protocol_version": listing.protocol_version,
        "devices": devices,
    }
    lines = [
        f"{address}: npu-emu {listing.server_version or '?'}, protocol {listing.protocol_version}"
    ]
    for d in devices:
        holder = f"  held by {d['holder']}" if d["holder"] else ""
        lines.append(
            f"{d['name']:<6} {d['target']:<6} hw {d['hw_version']:<7} {d['state']}{holder}"
        )
    emit(args, doc, lines)
    return 0


def _health(args: argparse.Namespace) -> int:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    channel, address, _ = _channel(args.url)
    with channel:
        try:
            status = (
                health_pb2_grpc.HealthStub(channel)
                .Check(health_pb2.HealthCheckRequest(), timeout=args.timeout)
                .status
            )
        except grpc.RpcError as exc:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"{address}: no health answer ({exc.code().name})"
            ) from None
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(status)
    emit(args, {"server": address, "status": name}, [f"{address}: {name}"])
    if status != health_pb2.HealthCheckResponse.SERVING:
        raise XrtError(ErrorCode.DEVICE_INTERNAL, f"{address} is {name}, not SERVING")
    return 0


def _waves_observed(args: argparse.Namespace) -> int:
    """`waves --observe`: a window of the holder's activity, `--cycles` long or cut at
    `--timeout` seconds of wall time, whichever comes first; no simulated time is run."""
    if not args.timeout > 0:
        raise CliError(f"--timeout must be positive, not {args.timeout}")
    with open_observer(args.url) as obs:
        start = obs.start_waves(args.cycles, args.signals)
        holder = obs.holder or "nobody"  # the holder whose activity the window records
        try:
            deadline = time.monotonic() + args.timeout
            status = obs.waves_status()
            while status.state == "recording" and (left := deadline - time.monotonic()) > 0:
                status = obs.waves_status(wait_s=min(left, 30.0))  # the server waits
        finally:  # Ctrl-C or a failure: the window does not stay open
            window = obs.stop_waves()
    f = window.file
    got = f.last_cycle - start
    why = {
        "full": f"the holder's activity ran the device through all {args.cycles} cycles",
        "stopped": f"the {args.timeout:g} s deadline passed after {got} of {args.cycles} "
        "cycles (the device's time moves only while its holder works)",
        "cut_by_holder": f"the holder started a window of its own after {got} cycles",
        "cut_by_lease_end": f"the holder's lease ended after {got} cycles",
    }
    doc = {
        "device": obs.device,
        "holder": obs.holder,
        **_window_doc(f),
        "state": window.state,
    }
    lines = [
        _window_line(f),
        f"window of {obs.device} held by {holder}: {why.get(window.state, window.state)}",
    ]
    emit(args, doc, lines)
    return 0


def _window_doc(f: Any) -> dict[str, Any]:
    return {
        "path": str(f.path),
        "first_cycle": f.first_cycle,
        "last_cycle": f.last_cycle,
        "bytes": f.size_bytes,
    }


def _window_line(f: Any) -> str:
    return (
        f"{f.path} (cycles {f.first_cycle}..{f.last_cycle}, {f.size_bytes} B, on the "
        "server's machine)"
    )


def _waves(args: argparse.Namespace) -> int:
    if args.cycles <= 0:
        raise CliError(f"--cycles must be positive, not {args.cycles}")
    if args.observe:
        return _waves_observed(args)
    with open_device(args.url) as dev:
        transport = dev.transport
        transport.start_waves(args.cycles, args.signals)  # type: ignore[attr-defined]
        # Run the device's clock through the window (it ends early on an interrupt).
        dev.wait_irq(timeout_s=600.0, max_cycles=args.cycles)
        window = transport.stop_waves()  # type: ignore[attr-defined]
    emit(args, _window_doc(window), [_window_line(window)])
    return 0


def _checkpoint(args: argparse.Namespace) -> int:
    """Save, restore or describe a checkpoint. Save and restore hold the device's lease for
    the command, as every device command does (the lease's end resets the device: keep a
    restored state by restoring from the program that uses it, `Device.restore`)."""
    if args.action == "info":
        from npuemu.server.checkpoint import MAX_FILE_BYTES, Checkpoint, CheckpointError

        try:
            with args.file.open("rb") as f:  # no checkpoint of any target is larger
                data = f.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                raise CheckpointError(f"larger than any checkpoint ({MAX_FILE_BYTES} bytes)")
            ckpt = Checkpoint.parse(data)
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror}") from None
        except CheckpointError as exc:
            raise CliError(f"{args.file}: {exc}") from None
        summary = ckpt.summary()
        emit(args, summary, [_info_line(k, v) for k, v in summary.items()])
        return 0
    with open_device(args.url) as dev:
        if args.action == "save":
            start = time.monotonic()
            try:
                cycle = dev.checkpoint(args.file, wait_cycles=args.wait_cycles)
            except OSError as exc:
                raise CliError(f"cannot write {args.file}: {exc.strerror}") from None
            size = args.file.stat().st_size
            took = time.monotonic() - start
            doc = {"file": str(args.file), "bytes": size, "device": dev.name, "cycle": cycle}
            line = f"{args.file}: {size} B, the state of {dev.name} at cycle {cycle} ({took:.2f} s)"
            emit(args, doc, [line])
        else:
            if not args.file.is_file():
                raise CliError(f"no checkpoint file {args.file}")
            cycle = dev.restore(args.file, portable=args.portable)
            what = "the memories and registers" if args.portable else "the state"
            doc = {"file": str(args.file), "device": dev.name, "cycle": cycle}
            line = f"{dev.name} now holds {what} of {args.file} (taken at cycle {cycle})"
            emit(args, doc, [line])
    return 0


def _info_line(key: str, value: Any) -> str:
    """A line of `checkpoint info`'s text: memories one by one."""
    if isinstance(value, dict):
        parts = (f"{n} {m['size']} B ({m['touched']} B touched)" for n, m in value.items())
        return f"{key}: {', '.join(parts)}"
    return f"{key}: {value}"


def run_device_command(args: argparse.Namespace) -> int | None:
    """Run a device command; None when `args.command` is not one.

    Raises:
        CliError: a bad name or value (exit status 2).
        XrtError: the device or server failed, or a bad URL (`xrt.exitcodes.for_error`).
    """
    handlers = {
        "devices": _devices,
        "health": _health,
        "regs": regs_command,
        "mem": _mem,
        "waves": _waves,
        "checkpoint": _checkpoint,
    }
    handler = handlers.get(args.command)
    if handler is None:
        return None
    if args.command == "regs" and args.regs_command == "dump":
        dump_block_not_device(args)  # `regs dump dma`: the block, not a device named dma
    if not (args.command == "checkpoint" and args.action == "info"):
        server = args.command in ("devices", "health") or getattr(args, "observe", False)
        args.url = device_from_args(
            args,
            f"npu-emu {args.command}",
            name=getattr(args, "device_name", None),
            schemes=SERVER_SCHEMES if server else None,
            server_default=True,
        )
    return handler(args)
