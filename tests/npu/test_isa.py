"""The instruction set's encode/decode, generated from rtl/isa/npu_isa.toml."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xrt.hw import isa
from xrt.hw.isa import INSN_BYTES, IsaError

INSN_CLASSES = (isa.Load, isa.Store, isa.Gemm, isa.Vec, isa.Sync, isa.Finish)


def _value(spec: isa.FieldSpec) -> st.SearchStrategy:
    if spec.kind == "flag":
        return st.booleans()
    if spec.kind == "enum":
        return st.sampled_from(list(spec.enum))
    if spec.kind == "sint":
        return st.integers(-(1 << (spec.width - 1)), (1 << (spec.width - 1)) - 1)
    return st.integers(0, (1 << spec.width) - 1)


@st.composite
def instructions(draw: st.DrawFn) -> isa.Instruction:
    cls = draw(st.sampled_from(INSN_CLASSES))
    return cls(**{spec.name: draw(_value(spec)) for spec in cls.FIELDS})


@given(st.lists(instructions(), min_size=1, max_size=20))
def test_every_instruction_round_trips(program):
    blob = isa.encode_program(program)
    assert len(blob) == INSN_BYTES * len(program)
    assert isa.decode_program(blob) == program


@given(instructions())
def test_fields_land_where_the_table_says(insn):
    word = insn.to_word()
    assert word & 0xF == insn.OPCODE
    assert word & insn.RESERVED_MASK == 0
    for spec in insn.FIELDS:
        raw = (word >> spec.lsb) & ((1 << spec.width) - 1)
        value = getattr(insn, spec.name)
        assert raw == int(value) & ((1 << spec.width) - 1)


def test_fields_of_an_instruction_never_overlap_and_fill_the_word():
    for cls in INSN_CLASSES:
        used = 0xF  # opcode
        for spec in cls.FIELDS:
            mask = ((1 << spec.width) - 1) << spec.lsb
            assert used & mask == 0, (cls.__name__, spec.name)
            used |= mask
        assert used | cls.RESERVED_MASK == (1 << (8 * INSN_BYTES)) - 1


def test_a_zeroed_word_is_not_an_instruction():
    with pytest.raises(IsaError, match="instruction 3: undefined opcode 0"):
        isa.decode_program(isa.Finish().encode() * 3 + bytes(INSN_BYTES))


def test_reserved_bits_are_refused_with_the_index():
    word = isa.Finish().to_word() | (1 << 200)
    blob = isa.Finish().encode() + word.to_bytes(INSN_BYTES, "little")
    with pytest.raises(IsaError, match=r"instruction 1: FINISH: reserved bits set"):
        isa.decode_program(blob)


def test_undefined_enum_values_are_refused():
    word = isa.Load(buffer=isa.Buffer.LUT).to_word() | (7 << 8)  # buffer = 7
    with pytest.raises(IsaError, match="buffer=7 is not a Buffer"):
        isa.decode(word, 0)


@pytest.mark.parametrize(
    ("insn", "message"),
    [
        (isa.Load(x_size=1024), "x_size=1024 does not fit 10 unsigned bits"),
        (isa.Gemm(acc_s0=40000), "acc_s0=40000 does not fit 16 signed bits"),
        (isa.Store(lo=-129), "lo=-129 does not fit 8 signed bits"),
    ],
)
def test_out_of_range_fields_are_refused_when_encoding(insn, message):
    with pytest.raises(IsaError, match=f"instruction 1: .*{message}"):
        isa.encode_program([isa.Finish(), insn])


def test_a_truncated_program_is_refused():
    with pytest.raises(IsaError, match="not a multiple of 32 bytes"):
        isa.decode_program(isa.Finish().encode()[:-1])
