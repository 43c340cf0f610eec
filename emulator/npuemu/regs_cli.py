"""`npu-emu regs read|write|dump`: registers by name from the generated map
(``BLOCK.REGISTER[.FIELD]``; the block may be left out when the name is unique), through a
leased device or, with ``--observe``, an observer of someone else's."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from npuemu.cli_common import CliError, emit, observed, open_device, open_observer

if TYPE_CHECKING:
    from xrt.hw.regmap import FieldInfo, RegisterBlockInfo, RegisterInfo

__all__ = ["regs_command", "resolve_name"]


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


def _fields(reg: RegisterInfo, value: int) -> dict[str, int]:
    return {f.name: f.extract(value) for f in reg.fields}


def _row(address: int, block: str, reg: RegisterInfo, value: int | None, why: str = "") -> Any:
    """One register of a dump: its JSON and its line."""
    doc: dict[str, Any] = {"address": address, "register": f"{block}.{reg.name}"}
    if value is None:
        doc["not_read"] = why
        shown = "(write-only)" if why == "write-only" else f"(not read: {why})"
        return doc, f"{address:#010x} {block}.{reg.name:<16} {shown}"
    doc.update(value=value, fields=_fields(reg, value))
    return doc, f"{address:#010x} {block}.{reg.name:<16} {value:#010x}  {_fields_text(reg, value)}"


def _one(label: str, address: int, reg: RegisterInfo, field: FieldInfo | None, value: int) -> Any:
    """A register (or field) read: its JSON and its line."""
    doc: dict[str, Any] = {"register": label, "address": address}
    if field is None:
        doc.update(value=value, fields=_fields(reg, value))
        return doc, f"{label} @ {address:#010x} = {value:#010x}  {_fields_text(reg, value)}"
    doc["value"] = field.extract(value)
    return doc, f"{label} @ {address:#010x} = {field.extract(value):#x}"


def dump_block_not_device(args: argparse.Namespace) -> None:
    """``regs dump BLOCK``: with the device given by ``--device`` or ``$XRT_DEVICE``, the
    one positional is the block (the old ``regs dump DEVICE [BLOCK]`` still parses)."""
    name = args.device_name
    if args.block is None and name is not None and name.lower() in _blocks():
        args.block, args.device_name = name, None


def _chosen_blocks(block: str | None) -> list[str]:
    blocks = _blocks()
    if block and block.lower() not in blocks:
        raise CliError(f"no register block {block!r} (npu, dma)")
    return [block.lower()] if block else list(blocks)


def regs_command(args: argparse.Namespace) -> int:
    """``npu-emu regs read|write|dump`` on the device at ``args.url``."""
    if getattr(args, "observe", False):
        return _regs_observed(args)
    if args.regs_command == "dump":
        blocks = _blocks()
        rows = []
        with open_device(args.url) as dev:
            for b in _chosen_blocks(args.block):
                region = dev.get_reg_region(b)
                for reg in blocks[b]:
                    view = region.regs.register(reg.name)
                    value = view.read() if reg.readable else None
                    rows.append(_row(view.address, b, reg, value, "write-only"))
        emit(args, {"device": args.url, "registers": [d for d, _ in rows]}, [t for _, t in rows])
        return 0
    block, reg, field = resolve_name(args.name)
    with open_device(args.url) as dev:
        view = dev.get_reg_region(block).regs.register(reg.name)
        label = f"{block}.{reg.name}" + (f".{field.name}" if field else "")
        if args.regs_command == "read":
            doc, line = _one(label, view.address, reg, field, view.read())
            emit(args, doc, [line])
            return 0
        if field is None:
            view.write(args.value)
        else:
            view.modify(**{field.name: args.value})
        doc = {"register": label, "address": view.address, "written": args.value}
        emit(args, doc, [f"{label} @ {view.address:#010x} <- {args.value:#x}"])
    return 0


def _regs_observed(args: argparse.Namespace) -> int:
    """`regs read|dump --observe`: one batch of reads through the Observe* calls."""
    from xrt.hw.regs import read_side_effect_text

    blocks = _blocks()
    if args.regs_command == "dump":
        with open_observer(args.url) as obs:
            wanted = []  # (address, block, register, why it is not read)
            for b in _chosen_blocks(args.block):
                base = obs.block_base(b)
                for reg in blocks[b]:
                    why = (
                        "write-only" if not reg.readable else read_side_effect_text(blocks[b], reg)
                    )
                    wanted.append((base + reg.offset, b, reg, why))
            values = iter(obs.read_registers([a for a, _, _, why in wanted if not why]))
            rows = [
                _row(addr, b, reg, None if why else next(values), why)
                for addr, b, reg, why in wanted
            ]
            emit(
                args,
                {"device": obs.device, "holder": obs.holder, "registers": [d for d, _ in rows]},
                [t for _, t in rows],
            )
            observed(obs)
        return 0
    block, reg, field = resolve_name(args.name)
    label = f"{block}.{reg.name}" + (f".{field.name}" if field else "")
    why = read_side_effect_text(blocks[block], reg)
    if why:
        raise CliError(f"{label}: {why}: an observer may not read it (it would change the device)")
    with open_observer(args.url) as obs:
        addr = obs.block_base(block) + reg.offset
        doc, line = _one(label, addr, reg, field, obs.read_register(addr))
        emit(args, {**doc, "device": obs.device, "holder": obs.holder}, [line])
        observed(obs)
    return 0
