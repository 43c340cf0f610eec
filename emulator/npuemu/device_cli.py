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
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from xrt import exitcodes
from xrt.errors import XrtError

if TYPE_CHECKING:
    from xrt.hw.regmap import FieldInfo, RegisterBlockInfo, RegisterInfo
    from xrt.npu_device.npu import NpuDevice
    from xrt.transport.grpc import Observer

__all__ = ["add_device_commands", "run_device_command"]

DEFAULT_SERVER = "127.0.0.1:50051"
OBSERVE_HELP = (
    "look at a device someone else holds, without its lease (the server's admin token in "
    "$NPU_EMU_ADMIN_TOKEN; reads only)"
)


class CliError(Exception):
    """A bad name or value: printed as one line, exit status 2."""


def _server(text: str) -> str:
    """``--server``: HOST:PORT, or the server's ``grpc://HOST:PORT`` URL (its address)."""
    rest = text.strip().removeprefix("grpc://").rstrip("/")
    if not re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}", rest):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a server's HOST:PORT (or grpc://HOST:PORT)"
        )
    return rest


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def add_device_commands(sub: argparse._SubParsersAction, formatter: type) -> None:
    """Add the device commands to `npu-emu`'s sub-command parser."""

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--server",
            type=_server,
            default=os.environ.get("NPU_EMU_SERVER", DEFAULT_SERVER),
            help="HOST:PORT (or grpc://HOST:PORT) of `npu-emu serve` ($NPU_EMU_SERVER)",
        )

    d = sub.add_parser("devices", help="list a server's devices", formatter_class=formatter)
    common(d)
    d.add_argument("--json", action="store_true", help="print the listing as one JSON document")

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
    r.add_argument("device")
    r.add_argument("name", help="BLOCK.REGISTER[.FIELD], e.g. npu.MAGIC")
    r.add_argument("--observe", action="store_true", help=OBSERVE_HELP)
    common(r)
    w = rsub.add_parser("write", help="write a register or a field", formatter_class=formatter)
    w.add_argument("device")
    w.add_argument("name", help="BLOCK.REGISTER[.FIELD]")
    w.add_argument("value", type=_int, help="value (0x.. for hex)")
    common(w)
    dump = rsub.add_parser("dump", help="every register, fields decoded", formatter_class=formatter)
    dump.add_argument("device")
    dump.add_argument("block", nargs="?", help="npu or dma (default: both)")
    dump.add_argument("--observe", action="store_true", help=OBSERVE_HELP)
    common(dump)

    mem = sub.add_parser("mem", help="read or write device memory", formatter_class=formatter)
    msub = mem.add_subparsers(dest="mem_command", required=True)
    mr = msub.add_parser("read", help="hex dump or save memory", formatter_class=formatter)
    mr.add_argument("device")
    mr.add_argument("where", help="REGION[:OFFSET] (udma, plddr, ocm) or a physical address")
    mr.add_argument("length", type=_int, help="bytes")
    mr.add_argument("--out", type=Path, help="write the bytes to this file instead")
    common(mr)
    mw = msub.add_parser("write", help="write bytes to memory", formatter_class=formatter)
    mw.add_argument("device")
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
    wv.add_argument("device")
    wv.add_argument(
        "--cycles", type=_int, default=10_000, help="simulated cycles the window runs for"
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
    cs.add_argument("device")
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
    cr.add_argument("device")
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


@contextmanager
def _device(server: str, name: str) -> Iterator[NpuDevice]:
    from xrt.device import Device

    url = name if name.startswith("grpc://") else f"grpc://{server}/{name}"
    dev = Device.open(url)
    try:
        yield dev  # type: ignore[misc]
    finally:
        dev.close()


def _observer(server: str, name: str) -> Observer:
    from xrt.transport.grpc import Observer

    url = name if name.startswith(("grpc://", "grpcs://")) else f"grpc://{server}/{name}"
    return Observer(url)


def _observed(obs: Observer) -> None:
    """One line on stderr: whose device was looked at, and that no lease was taken."""
    holder = obs.holder or "nobody"
    print(f"npu-emu: observed {obs.device} (held by {holder}; no lease taken)", file=sys.stderr)


def _blocks() -> dict[str, RegisterBlockInfo]:
    from xrt.hw.regs import DMA, NPU

    return {"npu": NPU, "dma": DMA}


def resolve_name(name: str) -> tuple[str, RegisterInfo, FieldInfo | None]:
    """``BLOCK.REG[.FIELD]`` or ``REG[.FIELD]`` -> (block, register, field or None)."""
    blocks = _blocks()
    parts = name.split(".")
    if parts[0].lower() in blocks:
        block_names = [parts[0].lower()]
        parts = parts[1:]
    else:
        block_names = [b for b, info in blocks.items() if parts[0].upper() in info]
    if not parts or len(parts) > 2:
        raise CliError(f"{name!r}: give BLOCK.REGISTER[.FIELD], e.g. npu.MAGIC")
    reg_name = parts[0].upper()
    found = [b for b in block_names if reg_name in blocks[b]]
    if not found:
        where = " or ".join(block_names) or "npu or dma"
        raise CliError(f"no register {reg_name!r} in {where} (see `npu-emu regs dump DEVICE`)")
    if len(found) > 1:
        choices = " or ".join(f"{b}.{reg_name}" for b in found)
        raise CliError(f"{reg_name} is in {' and '.join(found)}: say {choices}")
    reg = blocks[found[0]].register(reg_name)
    field = None
    if len(parts) == 2:
        fname = parts[1].upper()
        names = [f.name for f in reg.fields]
        if fname not in names:
            raise CliError(
                f"{found[0]}.{reg_name} has no field {fname!r} (fields: {', '.join(names)})"
            )
        field = reg.field(fname)
    return found[0], reg, field


def _fields_text(reg: RegisterInfo, value: int) -> str:
    return " ".join(f"{f.name}={f.extract(value):#x}" for f in reg.fields)


def _regs(args: argparse.Namespace) -> int:
    if getattr(args, "observe", False):
        return _regs_observed(args)
    if args.regs_command == "dump":
        blocks = _blocks()
        if args.block and args.block.lower() not in blocks:
            raise CliError(f"no register block {args.block!r} (npu, dma)")
        chosen = [args.block.lower()] if args.block else list(blocks)
        with _device(args.server, args.device) as dev:
            for b in chosen:
                region = dev.get_reg_region(b)
                for reg in blocks[b]:
                    view = region.regs.register(reg.name)
                    if not reg.readable:
                        print(f"{view.address:#010x} {b}.{reg.name:<16} (write-only)")
                        continue
                    value = view.read()
                    print(
                        f"{view.address:#010x} {b}.{reg.name:<16} {value:#010x}  "
                        f"{_fields_text(reg, value)}"
                    )
        return 0
    block, reg, field = resolve_name(args.name)
    with _device(args.server, args.device) as dev:
        view = dev.get_reg_region(block).regs.register(reg.name)
        label = f"{block}.{reg.name}" + (f".{field.name}" if field else "")
        if args.regs_command == "read":
            value = view.read()
            if field is None:
                print(f"{label} @ {view.address:#010x} = {value:#010x}  {_fields_text(reg, value)}")
            else:
                print(f"{label} @ {view.address:#010x} = {field.extract(value):#x}")
            return 0
        if field is None:
            view.write(args.value)
        else:
            view.modify(**{field.name: args.value})
        print(f"{label} @ {view.address:#010x} <- {args.value:#x}")
    return 0


def _regs_observed(args: argparse.Namespace) -> int:
    """`regs read|dump --observe`: one batch of reads through the Observe* calls."""
    from xrt.hw.regs import read_side_effect_text

    blocks = _blocks()
    if args.regs_command == "dump":
        if args.block and args.block.lower() not in blocks:
            raise CliError(f"no register block {args.block!r} (npu, dma)")
        chosen = [args.block.lower()] if args.block else list(blocks)
        with _observer(args.server, args.device) as obs:
            rows = []  # (address, block, register, value or why it was not read)
            for b in chosen:
                base = obs.block_base(b)
                for reg in blocks[b]:
                    why = (
                        "write-only" if not reg.readable else read_side_effect_text(blocks[b], reg)
                    )
                    rows.append((base + reg.offset, b, reg, why))
            values = iter(obs.read_registers([a for a, _, _, why in rows if not why]))
            for addr, b, reg, why in rows:
                if why:
                    shown = "(write-only)" if why == "write-only" else f"(not read: {why})"
                    print(f"{addr:#010x} {b}.{reg.name:<16} {shown}")
                    continue
                value = next(values)
                print(f"{addr:#010x} {b}.{reg.name:<16} {value:#010x}  {_fields_text(reg, value)}")
            _observed(obs)
        return 0
    block, reg, field = resolve_name(args.name)
    label = f"{block}.{reg.name}" + (f".{field.name}" if field else "")
    why = read_side_effect_text(blocks[block], reg)
    if why:
        raise CliError(f"{label}: {why}: an observer may not read it (it would change the device)")
    with _observer(args.server, args.device) as obs:
        addr = obs.block_base(block) + reg.offset
        value = obs.read_register(addr)
        if field is None:
            print(f"{label} @ {addr:#010x} = {value:#010x}  {_fields_text(reg, value)}")
        else:
            print(f"{label} @ {addr:#010x} = {field.extract(value):#x}")
        _observed(obs)
    return 0


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


def _hexdump(addr: int, data: bytes) -> None:
    for i in range(0, len(data), 16):
        row = data[i : i + 16]
        text = "".join(chr(c) if 32 <= c < 127 else "." for c in row)
        print(f"{addr + i:#012x}  {row.hex(' '):<47}  {text}")


def _mem(args: argparse.Namespace) -> int:
    with _device(args.server, args.device) as dev:
        region, addr = _where(dev, args.where)
        if args.mem_command == "read":
            if args.length <= 0:
                raise CliError(f"length must be positive, not {args.length}")
            buf = bytearray(args.length)
            region.read(buf, addr)  # type: ignore[attr-defined]
            if args.out:
                args.out.write_bytes(buf)
                print(f"{len(buf)} B from {args.where} ({addr:#x}) -> {args.out}")
            else:
                _hexdump(addr, bytes(buf))
            return 0
        if args.infile is not None:
            data = args.infile.read_bytes()
        else:
            try:
                data = bytes.fromhex(args.hex)
            except ValueError as exc:
                raise CliError(f"--hex {args.hex!r}: {exc}") from None
        region.write(addr, data)  # type: ignore[attr-defined]
        print(f"{len(data)} B -> {args.where} ({addr:#x})")
    return 0


def _devices(args: argparse.Namespace) -> int:
    import grpc

    from xrt.hw.wire import pb, pb_grpc
    from xrt.transport.grpc.errors import rpc_error

    token = os.environ.get("NPU_EMU_TOKEN")
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.insecure_channel(args.server) as channel:
        stub = pb_grpc.DeviceServiceStub(channel)
        try:
            listing = stub.ListDevices(pb.ListDevicesRequest(), timeout=10, metadata=metadata)
        except grpc.RpcError as exc:  # a sentence saying what failed, exit 1 (xrt.exitcodes)
            raise rpc_error(exc, f"listing the devices of {args.server}") from None
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
    if args.json:
        doc = {
            "server": args.server,
            "server_version": listing.server_version or None,
            "protocol_version": listing.protocol_version,
            "devices": devices,
        }
        print(json.dumps(doc, indent=1))
        return 0
    print(
        f"{args.server}: npu-emu {listing.server_version or '?'}, "
        f"protocol {listing.protocol_version}"
    )
    for d in devices:
        holder = f"  held by {d['holder']}" if d["holder"] else ""
        print(f"{d['name']:<6} {d['target']:<6} hw {d['hw_version']:<7} {d['state']}{holder}")
    return 0


def _health(args: argparse.Namespace) -> int:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(args.server) as channel:
        try:
            status = (
                health_pb2_grpc.HealthStub(channel)
                .Check(health_pb2.HealthCheckRequest(), timeout=args.timeout)
                .status
            )
        except grpc.RpcError as exc:
            print(f"{args.server}: {exc.code().name}", file=sys.stderr)
            return 1
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(status)
    print(f"{args.server}: {name}")
    return 0 if status == health_pb2.HealthCheckResponse.SERVING else 1


def _waves_observed(args: argparse.Namespace) -> int:
    """`waves --observe`: a window of the holder's activity, `--cycles` long or cut at
    `--timeout` seconds of wall time, whichever comes first; no simulated time is run."""
    if not args.timeout > 0:
        raise CliError(f"--timeout must be positive, not {args.timeout}")
    with _observer(args.server, args.device) as obs:
        start = obs.start_waves(args.cycles)
        holder = obs.holder or "nobody"  # the holder whose activity the window records
        try:
            deadline = time.monotonic() + args.timeout
            status = obs.waves_status()
            while status.state == "recording" and (left := deadline - time.monotonic()) > 0:
                status = obs.waves_status(wait_s=min(left, 30.0))  # the server waits
        finally:  # Ctrl-C or a failure: the window does not stay open
            window = obs.stop_waves()
    f = window.file
    print(
        f"{f.path} (cycles {f.first_cycle}..{f.last_cycle}, {f.size_bytes} B, on the "
        "server's machine)"
    )
    got = f.last_cycle - start
    why = {
        "full": f"the holder's activity ran the device through all {args.cycles} cycles",
        "stopped": f"the {args.timeout:g} s deadline passed after {got} of {args.cycles} "
        "cycles (the device's time moves only while its holder works)",
        "cut_by_holder": f"the holder started a window of its own after {got} cycles",
        "cut_by_lease_end": f"the holder's lease ended after {got} cycles",
    }
    print(f"window of {obs.device} held by {holder}: {why.get(window.state, window.state)}")
    return 0


def _waves(args: argparse.Namespace) -> int:
    if args.cycles <= 0:
        raise CliError(f"--cycles must be positive, not {args.cycles}")
    if args.observe:
        return _waves_observed(args)
    with _device(args.server, args.device) as dev:
        transport = dev.transport
        transport.start_waves(args.cycles)  # type: ignore[attr-defined]
        # Run the device's clock through the window (it ends early on an interrupt).
        dev.wait_irq(timeout_s=600.0, max_cycles=args.cycles)
        window = transport.stop_waves()  # type: ignore[attr-defined]
    print(
        f"{window.path} (cycles {window.first_cycle}..{window.last_cycle}, "
        f"{window.size_bytes} B, on the server's machine)"
    )
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
        print(json.dumps(ckpt.summary(), indent=2))
        return 0
    with _device(args.server, args.device) as dev:
        if args.action == "save":
            start = time.monotonic()
            try:
                cycle = dev.checkpoint(args.file, wait_cycles=args.wait_cycles)
            except OSError as exc:
                raise CliError(f"cannot write {args.file}: {exc.strerror}") from None
            size = args.file.stat().st_size
            took = time.monotonic() - start
            print(f"{args.file}: {size} B, the state of {dev.name} at cycle {cycle} ({took:.2f} s)")
        else:
            if not args.file.is_file():
                raise CliError(f"no checkpoint file {args.file}")
            cycle = dev.restore(args.file, portable=args.portable)
            what = "the memories and registers" if args.portable else "the state"
            print(f"{dev.name} now holds {what} of {args.file} (taken at cycle {cycle})")
    return 0


def run_device_command(args: argparse.Namespace) -> int | None:
    """Run a device command; None when `args.command` is not one."""
    handlers = {
        "devices": _devices,
        "health": _health,
        "regs": _regs,
        "mem": _mem,
        "waves": _waves,
        "checkpoint": _checkpoint,
    }
    handler = handlers.get(args.command)
    if handler is None:
        return None
    try:
        return handler(args)
    except CliError as exc:
        print(f"npu-emu: {exc}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except XrtError as exc:
        print(f"npu-emu: {exc}", file=sys.stderr)
        return exitcodes.for_error(exc)
