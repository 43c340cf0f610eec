"""RegRegion: named access through a register map, field read-modify-write that respects
each field's access (w1c, single-pulse, read-only, write-only), batches, polls."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from xrt import (
    ErrorCode,
    RegisterView,
    RegMaskedWrite,
    RegPoll,
    RegRead,
    RegRegion,
    RegWrite,
    XrtError,
)
from xrt.hw.regmap import FieldInfo, RegisterBlockInfo, RegisterInfo
from xrt.registers import RegOp
from xrt.testing.memory_transport import MemoryRegRegion

BLOCK = RegisterBlockInfo(
    name="blk",
    size=0x20,
    registers=(
        RegisterInfo("ID", 0x00, 32, (FieldInfo("VALUE", 0, 32, "r", 0xC0FFEE01),)),
        RegisterInfo(
            "CTRL",
            0x04,
            32,
            (
                FieldInfo("START", 0, 1, "rw", 0, singlepulse=True),
                FieldInfo("MODE", 1, 3, "rw", 2),
                FieldInfo("LEN", 8, 8, "rw", 0x10),
            ),
        ),
        RegisterInfo(
            "STATUS",
            0x08,
            32,
            (FieldInfo("BUSY", 0, 1, "r", 0, hw="w"), FieldInfo("DONE", 1, 1, "r", 0, hw="w")),
        ),
        RegisterInfo(
            "INT",
            0x0C,
            32,
            (
                FieldInfo("DONE", 0, 1, "rw", 0, onwrite="woclr"),
                FieldInfo("ERR", 1, 1, "rw", 0, onwrite="woclr"),
                FieldInfo("EN", 8, 1, "rw", 0),
            ),
        ),
        RegisterInfo(
            "KEY",
            0x10,
            32,
            (FieldInfo("VALUE", 0, 16, "w", 0), FieldInfo("LOCK", 16, 1, "rw", 0)),
        ),
        RegisterInfo(
            "W0C",
            0x14,
            32,
            (
                FieldInfo("FLAGS", 0, 4, "rw", 0xF, onwrite="wzc"),
                FieldInfo("CFG", 8, 4, "rw", 0),
            ),
        ),
        RegisterInfo(
            "CLR",
            0x18,
            32,
            (FieldInfo("ALL", 0, 1, "rw", 1, onwrite="wclr"), FieldInfo("X", 4, 1, "rw", 0)),
        ),
    ),
)
BASE = 0x4000_0000


def raises(code: ErrorCode) -> pytest.RaisesContext:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


@pytest.fixture
def region() -> MemoryRegRegion:
    return MemoryRegRegion("blk", BASE, regmap=BLOCK)


def test_reset_values_and_plain_access(region: MemoryRegRegion) -> None:
    regs = region.regs
    assert region.size == 0x20
    assert regs.ID.read() == 0xC0FFEE01 == region.read(BASE) == region.read(0, relative=True)
    assert regs.CTRL.read_fields() == {"START": 0, "MODE": 2, "LEN": 0x10}
    assert regs["ctrl"] is regs.CTRL and regs.CTRL.address == BASE + 4
    assert [r.name for r in regs] == [r.name for r in BLOCK]
    assert "CTRL" in regs and "NOPE" not in regs and len(regs) == 7
    assert "CTRL" in dir(regs) and "MODE" in dir(regs.CTRL)
    regs.CTRL.write(0x0000_2A0A)
    assert regs.CTRL.MODE.read() == 5 and regs.CTRL.LEN.read() == 0x2A
    assert regs.dump()["CTRL"] == 0x2A0A and "KEY" in regs.dump()


def test_modify_preserves_plain_fields_and_fires_no_pulse(region: MemoryRegRegion) -> None:
    ctrl = region.regs.CTRL
    region.log.clear()
    before = region.batches
    ctrl.modify(MODE=5)
    assert region.batches == before + 1, "one modify is one batch: one round trip"
    assert [k for k, _, _ in region.log] == ["r", "w"], "a read-modify-write"
    assert ctrl.read_fields() == {"START": 0, "MODE": 5, "LEN": 0x10}
    assert region.pulses == []
    ctrl.START.write(1)
    assert region.pulses == [(0x04, "START")]
    assert ctrl.read_fields() == {"START": 0, "MODE": 5, "LEN": 0x10}


def test_modify_never_clears_other_w1c_bits(region: MemoryRegRegion) -> None:
    intr = region.regs.INT
    region.hw_set(0x0C, 0b11)  # the hardware raised DONE and ERR
    intr.EN.write(1)
    assert intr.read_fields() == {"DONE": 1, "ERR": 1, "EN": 1}, "pending bits survived"
    intr.DONE.write(1)  # acknowledge DONE only
    assert intr.read_fields() == {"DONE": 0, "ERR": 1, "EN": 1}
    intr.modify(ERR=1, EN=0)
    assert intr.read_fields() == {"DONE": 0, "ERR": 0, "EN": 0}
    # Why the named form matters: a raw masked read-modify-write writes the 1 it read back.
    region.hw_set(0x0C, 0b11)
    region.write_masked(0x0C, 0x100, 0x100, relative=True)
    assert intr.read_fields()["DONE"] == 0 and intr.read_fields()["ERR"] == 0


def test_write_zero_to_clear_fields_are_written_ones(region: MemoryRegRegion) -> None:
    w0c = region.regs.W0C
    w0c.CFG.write(3)
    assert w0c.read_fields() == {"FLAGS": 0xF, "CFG": 3}
    w0c.FLAGS.write(0b1110)  # a 0 clears bit 0
    assert w0c.read_fields() == {"FLAGS": 0b1110, "CFG": 3}


def test_fields_a_partial_write_cannot_leave_alone(region: MemoryRegRegion) -> None:
    with raises(ErrorCode.WRONG_TYPE):
        region.regs.KEY.LOCK.write(1)  # would overwrite the write-only VALUE
    region.regs.KEY.modify(VALUE=0x1234, LOCK=1)
    assert region.hw_get(0x10) == 0x1_1234
    with raises(ErrorCode.WRONG_TYPE):
        region.regs.KEY.VALUE.read()
    assert region.regs.KEY.LOCK.read() == 1
    with raises(ErrorCode.WRONG_TYPE):
        region.regs.CLR.X.write(1)  # any write clears ALL
    region.regs.CLR.modify(X=1, ALL=0)


def test_read_only_registers_and_fields(region: MemoryRegRegion) -> None:
    status = region.regs.STATUS
    with raises(ErrorCode.WRONG_TYPE):
        status.DONE.write(1)
    with raises(ErrorCode.WRONG_TYPE):
        status.write(0)
    region.write(BASE + 8, 0xFFFF_FFFF)  # raw writes reach the bus; the hardware ignores them
    assert status.read() == 0
    region.hw_set(0x08, 0b10)
    assert status.DONE.read() == 1 and status.BUSY.read() == 0


def test_bad_names_and_values(region: MemoryRegRegion) -> None:
    regs = region.regs
    with raises(ErrorCode.WRONG_TYPE):
        _ = regs.NOPE
    with raises(ErrorCode.WRONG_TYPE):
        _ = regs["NOPE"]
    with raises(ErrorCode.WRONG_TYPE):
        _ = regs.CTRL.NOPE
    assert not hasattr(regs, "NOPE") and getattr(regs.CTRL, "NOPE", None) is None
    with raises(ErrorCode.WRONG_TYPE):
        regs.register(4)  # type: ignore[arg-type]
    for bad in (8, -1):
        with raises(ErrorCode.OUT_OF_RANGE):
            regs.CTRL.modify(MODE=bad)
    with raises(ErrorCode.WRONG_TYPE):
        regs.CTRL.modify(MODE=1.0)  # type: ignore[arg-type]
    with raises(ErrorCode.OUT_OF_RANGE):
        regs.CTRL.modify()
    with raises(ErrorCode.OUT_OF_RANGE):
        regs.CTRL.write(1 << 32)
    with raises(ErrorCode.WRONG_TYPE):
        regs.STATUS.poll(DONE=1, mask=2, expected=2)
    with raises(ErrorCode.WRONG_TYPE):
        regs.STATUS.poll()


def test_poll_with_a_model_of_the_hardware(region: MemoryRegRegion) -> None:
    status = region.regs.STATUS
    with raises(ErrorCode.TIMEOUT):
        status.poll(DONE=1, max_polls=3)
    with raises(ErrorCode.TIMEOUT):
        status.DONE.poll(1, timeout_s=0.01)
    reads = 0

    def hardware(offset: int) -> None:  # DONE rises on the 4th read of STATUS
        nonlocal reads
        if offset == 0x08:
            reads += 1
            if reads == 4:
                region.hw_set(0x08, 0b10)

    region.on_read = hardware
    assert status.poll(DONE=1, max_polls=10) == 0b10
    assert reads == 4
    reads = 0
    region.hw_set(0x08, 0)
    with raises(ErrorCode.TIMEOUT) as e:
        region.poll(BASE + 8, 0b10, 0b10, max_polls=3)
    assert "0x40000008" in e.value.message and "3 reads" in e.value.message


def test_batch_builder(region: MemoryRegRegion) -> None:
    regs = region.regs
    region.hw_set(0x08, 0b10)
    before = region.batches
    with region.batch() as b:
        b.write(regs.CTRL, 0x0000_0500)
        b.modify("CTRL", MODE=3)
        i_ctrl = b.read("CTRL")
        b.poll(regs.STATUS, DONE=1, max_polls=2)
        b.write_masked(BASE + 0x14, 0x0000_0500, 0x0000_0F00)
        i_raw = b.read(BASE + 0x14)
        i_poll = b.poll(BASE + 8, 0b10, 0b10, max_polls=1)
    assert region.batches == before + 1
    assert b.results is not None and len(b) == 7
    assert b.results[i_ctrl] == 0x0506 and b.results[i_raw] == 0x050F
    assert b.results[i_poll] == 0b10
    with raises(ErrorCode.WRONG_ORDER):
        b.run()
    with raises(ErrorCode.WRONG_ORDER):
        b.read(0)
    rel = region.batch(relative=True)
    rel.modify(regs.INT, EN=1)
    rel.read(0x0C)
    rel.poll("INT", EN=1, max_polls=1)
    assert rel.run() == [None, 0x100, 0x100]
    with raises(ErrorCode.WRONG_TYPE):
        region.batch().modify(0x0C, EN=1)  # fields need a named register
    failing = region.batch()
    failing.write(regs.CTRL, 0)
    with pytest.raises(ZeroDivisionError), failing:
        _ = 1 / 0
    assert failing.results is None, "a batch does not run when its block raised"


def test_execute_checks_ops() -> None:
    r = MemoryRegRegion("raw", 0x1000, 0x40)
    assert r.execute([RegWrite(0x1004, 5), RegRead(0x1004)]) == [None, 5]
    with raises(ErrorCode.WRONG_TYPE):
        r.execute([RegRead("0x1000")])  # type: ignore[arg-type]
    with raises(ErrorCode.OUT_OF_RANGE):
        r.execute([RegPoll(0x1004, 1, 1, max_polls=1, timeout_s=-1.0)])
    with raises(ErrorCode.OUT_OF_RANGE):
        r.execute([RegMaskedWrite(0x1004, 1, -1)])
    with raises(ErrorCode.WRONG_ORDER):
        _ = r.regs
    assert r.poll(0x1004, 0xF, 5) == 5  # no limits given: the default timeout applies


def test_region_construction_and_maps() -> None:
    with raises(ErrorCode.OUT_OF_RANGE):
        MemoryRegRegion("x", 0x1002, 0x10)
    with raises(ErrorCode.OUT_OF_RANGE):
        MemoryRegRegion("x", 0x1000, 0x12)
    with raises(ErrorCode.OUT_OF_RANGE):
        MemoryRegRegion("x", 0x1000)
    with raises(ErrorCode.OUT_OF_RANGE):
        MemoryRegRegion("x", 0x1000, 0x10, regmap=BLOCK)
    with raises(ErrorCode.WRONG_TYPE):
        MemoryRegRegion("x", 0x1000, 0x40).attach_regmap({"CTRL": 4})  # type: ignore[arg-type]
    with raises(ErrorCode.WRONG_TYPE):
        MemoryRegRegion("", 0x1000, 0x40)
    r = MemoryRegRegion("x", 0x1000, 0x40)
    r.attach_regmap(BLOCK)
    assert r.regs.ID.read() == 0xC0FFEE01 and "map='blk'" in repr(r)


def test_misbehaving_transports_raise_device_internal() -> None:
    class Bad(RegRegion):
        def __init__(self, value: object, short: bool = False) -> None:
            super().__init__("bad", 0, 0x10)
            self.value = value
            self.short = short

        def _read32(self, addr: int) -> int:
            return self.value  # type: ignore[return-value]

        def _write32(self, addr: int, value: int) -> None:
            pass

        def _batch(self, ops: Sequence[RegOp]) -> list[int | None]:
            results = super()._batch(ops)
            return results[:-1] if self.short else results

    for value in (-1, 1 << 32, "0", 1.0):
        with raises(ErrorCode.DEVICE_INTERNAL):
            Bad(value).read(0)
        with raises(ErrorCode.DEVICE_INTERNAL):
            Bad(value).execute([RegRead(0)])
    with raises(ErrorCode.DEVICE_INTERNAL):
        Bad(0, short=True).execute([RegRead(0), RegRead(4)])


def test_generated_maps() -> None:
    """The real NPU/DMA maps: w1c interrupt bits and single-pulse controls behave."""
    from xrt.hw.regs import DMA, NPU

    npu = MemoryRegRegion("npu", 0x4000_0000, regmap=NPU)
    dma = MemoryRegRegion("dma", 0x8000_0000, regmap=DMA)
    assert npu.regs.MAGIC.read() == NPU.register("MAGIC").reset == 0x4E505530  # "NPU0"
    assert dma.regs.MAGIC.read() == DMA.register("MAGIC").reset == 0x444D4130  # "DMA0"
    npu.regs.SCRATCH.write(0xDEAD_BEEF)
    assert npu.read(NPU.register("SCRATCH").offset, relative=True) == 0xDEAD_BEEF
    dma.log.clear()
    dma.regs.CTRL.modify(START=1)
    assert [k for k, _, _ in dma.log] == ["w"], "only pulse fields: no read needed"
    assert dma.pulses == [(DMA.register("CTRL").offset, "START")]
    off = DMA.register("INT_STATUS").offset
    dma.hw_set(off, 0b11)
    dma.regs.INT_STATUS.DONE.write(1)
    assert dma.regs.INT_STATUS.read_fields() == {"DONE": 0, "ERROR": 1}
    assert isinstance(dma.regs.STATUS, RegisterView)


def test_field_writes_from_threads_lose_no_update() -> None:
    """Each masked write is atomic against other accesses through the region: two threads
    read-modify-writing different fields of one register never undo each other."""
    import threading
    import time

    class Slow(MemoryRegRegion):
        def _read32(self, addr: int) -> int:
            value = super()._read32(addr)
            time.sleep(0.0002)  # invite a thread switch between the read and the write
            return value

    ctrl = Slow("blk", BASE, regmap=BLOCK).regs.CTRL
    errors: list[BaseException] = []

    def spin(field: str, values: list[int]) -> None:
        try:
            for v in values:
                ctrl.modify(**{field: v})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    a = threading.Thread(target=spin, args=("MODE", [i % 8 for i in range(1, 60)]))
    b = threading.Thread(target=spin, args=("LEN", [i % 256 for i in range(100, 160)]))
    a.start()
    b.start()
    a.join()
    b.join()
    assert not errors
    assert ctrl.read_fields()["MODE"] == 59 % 8 and ctrl.read_fields()["LEN"] == 159
