"""The instruction set: the generated instruction classes plus program encode/decode.

Example::

    from xrt.hw import isa
    prog = [isa.Load(buffer=isa.Buffer.INP, base=1, x_size=4, y_size=1, z_size=1,
                     x_stride=16, push_next=True),
            isa.Finish()]
    blob = isa.encode_program(prog)
    assert isa.decode_program(blob) == prog
"""

from __future__ import annotations

from collections.abc import Iterable

from xrt.hw._generated.isa import (
    ERROR_TEXT,
    INSN_BYTES,
    INSTRUCTIONS,
    Buffer,
    EngineError,
    Finish,
    Gemm,
    GemmInit,
    Load,
    Opcode,
    Store,
    StoreMode,
    Sync,
    Unit,
    Vec,
    VecFunc,
)
from xrt.hw._insn import FieldSpec, Instruction, IsaError

__all__ = [
    "ERROR_TEXT",
    "INSN_BYTES",
    "Buffer",
    "EngineError",
    "FieldSpec",
    "Finish",
    "Gemm",
    "GemmInit",
    "Instruction",
    "IsaError",
    "Load",
    "Opcode",
    "Store",
    "StoreMode",
    "Sync",
    "Unit",
    "Vec",
    "VecFunc",
    "decode",
    "decode_program",
    "encode_program",
    "unit_of",
]

_BY_OPCODE = {cls.OPCODE: cls for cls in INSTRUCTIONS}


def decode(data: bytes | int, index: int | None = None) -> Instruction:
    """Decode one instruction (its INSN_BYTES bytes, or the word as an int).

    Raises:
        IsaError: undefined opcode or enum value, or a reserved bit set; the message names
            the instruction index when given.
    """
    if isinstance(data, int):
        word = data
    else:
        if len(data) != INSN_BYTES:
            raise IsaError(f"an instruction is {INSN_BYTES} bytes, got {len(data)}", index)
        word = int.from_bytes(data, "little")
    cls = _BY_OPCODE.get(word & 0xF)
    if cls is None:
        raise IsaError(f"undefined opcode {word & 0xF}", index)
    return cls.from_word(word, index)


def encode_program(program: Iterable[Instruction]) -> bytes:
    """The program's bytes, instruction after instruction."""
    out = bytearray()
    for i, insn in enumerate(program):
        try:
            out += insn.encode()
        except IsaError as exc:
            raise IsaError(str(exc).split(": ", 1)[-1], i) from None
    return bytes(out)


def decode_program(blob: bytes) -> list[Instruction]:
    """Decode a whole program; the error names the first malformed instruction."""
    if len(blob) % INSN_BYTES:
        raise IsaError(f"program length {len(blob)} is not a multiple of {INSN_BYTES} bytes")
    return [
        decode(blob[i : i + INSN_BYTES], i // INSN_BYTES) for i in range(0, len(blob), INSN_BYTES)
    ]


def unit_of(insn: Instruction) -> Unit | None:
    """The unit that executes ``insn`` (None for FINISH, which waits for all)."""
    if isinstance(insn, Sync):
        return Unit(insn.unit)
    return {"LOAD": Unit.LOAD, "COMPUTE": Unit.COMPUTE, "STORE": Unit.STORE}.get(insn.UNIT)
