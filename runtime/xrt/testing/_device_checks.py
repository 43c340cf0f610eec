"""The contract checks of `RegRegion` and `Device` (`xrt.testing.contracts.REG_REGION_CHECKS`,
`DEVICE_CHECKS`): register round trips, bad accesses, batches, polls and named access; a
device's regions, closing it and its interrupt line."""

from __future__ import annotations

from collections.abc import Callable

from xrt.errors import ErrorCode, XrtError
from xrt.registers import RegMaskedWrite, RegPoll, RegRead, RegWrite
from xrt.testing._check_tools import DeviceFactory, RegTargetFactory, expect_error

__all__ = ["DEVICE_CHECKS", "REG_REGION_CHECKS"]


# -- RegRegion -----------------------------------------------------------------------------


def check_reg_roundtrip(make_target: RegTargetFactory) -> None:
    """The scratch register holds what is written, through absolute and relative addresses."""
    t = make_target()
    r = t.region
    for v in (0, 0xFFFF_FFFF, 0x1234_5678, 0x8000_0001):
        r.write(r.base + t.scratch, v)
        assert r.read(r.base + t.scratch) == v
        assert r.read(t.scratch, relative=True) == v
    r.write(t.scratch, 0xCAFE_F00D, relative=True)
    assert r.read(r.base + t.scratch) == 0xCAFE_F00D


def check_reg_constant(make_target: RegTargetFactory) -> None:
    """A read-only constant register reads its value, and a write leaves it unchanged.

    The bus may ignore the write (a register model) or refuse it: the generated CSR blocks
    answer SLVERR to a write of a read-only register, which a transport reports as
    XrtError 11014. Either way the value stays.
    """
    t = make_target()
    if t.constant is None:
        return
    off, value = t.constant
    r = t.region
    assert r.read(off, relative=True) == value
    try:
        r.write(off, value ^ 0xFFFF_FFFF, relative=True)
    except XrtError as exc:
        assert exc.code == ErrorCode.DEVICE_INTERNAL, f"a refused write must raise 11014: {exc}"
        assert exc.message, "an XrtError must say what was wrong"
    assert r.read(off, relative=True) == value


def check_reg_bad_access(make_target: RegTargetFactory) -> None:
    """Misaligned or out-of-range addresses and values not fitting 32 bits raise 11003;
    wrong types raise 11010; nothing reaches the device."""
    t = make_target()
    r = t.region
    r.write(t.scratch, 0x55, relative=True)
    for bad in (r.base + t.scratch + 1, r.base + t.scratch + 2, r.base - 4, r.end, r.end + 4):
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.read(bad)
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.write(bad, 0)
    for bad in (-4, r.size, t.scratch + 1):
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.read(bad, relative=True)
    for value in (-1, 1 << 32):
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.write(t.scratch, value, relative=True)
    with expect_error(ErrorCode.WRONG_TYPE):
        r.read(float(r.base + t.scratch))  # type: ignore[arg-type]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.write(r.base + t.scratch, True)
    with expect_error(ErrorCode.WRONG_TYPE):
        r.write(r.base + t.scratch, 1.5)  # type: ignore[arg-type]
    assert r.read(t.scratch, relative=True) == 0x55


def check_reg_batch(make_target: RegTargetFactory) -> None:
    """A batch runs its ops in order and returns one result per op."""
    t = make_target()
    r = t.region
    a = r.base + t.scratch
    results = r.execute(
        [
            RegWrite(a, 0x0000_00F0),
            RegRead(a),
            RegMaskedWrite(a, 0x0000_0A0F, 0x0000_0F0F),
            RegRead(a),
            RegPoll(a, 0x0000_0FFF, 0x0000_0AFF, max_polls=5),
            RegWrite(a, 7),
        ]
    )
    assert results == [None, 0xF0, None, 0xAFF, 0xAFF, None]
    assert r.read(a) == 7
    assert r.execute([]) == []
    rel = r.execute([RegWrite(t.scratch, 9), RegRead(t.scratch)], relative=True)
    assert rel == [None, 9]
    with r.batch(relative=True) as b:
        b.write(t.scratch, 0x1111)
        i = b.read(t.scratch)
    assert b.results is not None and b.results[i] == 0x1111


def check_reg_batch_checked_first(make_target: RegTargetFactory) -> None:
    """A batch with one bad op raises before any op runs."""
    t = make_target()
    r = t.region
    r.write(t.scratch, 1, relative=True)
    bad_ops = (
        RegWrite(r.end, 0),
        RegWrite(r.base + t.scratch + 2, 0),
        RegMaskedWrite(r.base + t.scratch, 1 << 32, 1),
        RegPoll(r.base + t.scratch, 0x1, 0x3, max_polls=1),
        RegPoll(r.base + t.scratch, 0x1, 0x1, max_polls=0),
    )
    for bad in bad_ops:
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.execute([RegWrite(r.base + t.scratch, 2), bad])
        assert r.read(t.scratch, relative=True) == 1, f"{bad!r} let earlier ops run"
    with expect_error(ErrorCode.WRONG_TYPE):
        r.execute([RegWrite(r.base + t.scratch, 2), "read"])  # type: ignore[list-item]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.execute(RegRead(r.base + t.scratch))  # type: ignore[arg-type]
    assert r.read(t.scratch, relative=True) == 1


def check_reg_poll_timeout(make_target: RegTargetFactory) -> None:
    """A poll whose condition never holds raises 11015 (by count and by time); the ops
    before it have run, the ones after it have not."""
    t = make_target()
    r = t.region
    a = r.base + t.scratch
    r.write(a, 0)
    with expect_error(ErrorCode.TIMEOUT):
        r.execute([RegWrite(a, 5), RegPoll(a, 0xF, 0x6, max_polls=3), RegWrite(a, 9)])
    assert r.read(a) == 5
    with expect_error(ErrorCode.TIMEOUT):
        r.poll(a, 0xF, 0x6, timeout_s=0.02, interval_s=0.005)
    assert r.poll(a, 0xF, 0x5, timeout_s=0.0) == 5


def check_reg_named_access(make_target: RegTargetFactory) -> None:
    """With a map whose register at the scratch offset is plain read/write, named access
    reads and writes the same bits as raw access."""
    t = make_target()
    r = t.region
    if r.regmap is None:
        with expect_error(ErrorCode.WRONG_ORDER):
            _ = r.regs
        return
    info = r.regmap.at(t.scratch)
    if info is None:
        return
    reg = r.regs[info.name]
    assert reg.address == r.base + t.scratch
    reg.write(0x0BAD_F00D)
    assert r.read(t.scratch, relative=True) == 0x0BAD_F00D == reg.read()
    f = info.fields[0]
    reg.modify(**{f.name: 1})
    assert f.extract(r.read(t.scratch, relative=True)) == 1
    with expect_error(ErrorCode.WRONG_TYPE):
        _ = r.regs.NO_SUCH_REGISTER_XYZ


REG_REGION_CHECKS: tuple[Callable[[RegTargetFactory], None], ...] = (
    check_reg_roundtrip,
    check_reg_constant,
    check_reg_bad_access,
    check_reg_batch,
    check_reg_batch_checked_first,
    check_reg_poll_timeout,
    check_reg_named_access,
)


# -- Device --------------------------------------------------------------------------------


def check_device_regions(make_device: DeviceFactory) -> None:
    """Regions are reachable by name and as defaults; unknown names raise 11010."""
    with make_device() as dev:
        for name, region in dev.mem_regions.items():
            assert dev.get_mem_region(name) is region and region.device is dev
        for name, region in dev.reg_regions.items():
            assert dev.get_reg_region(name) is region and region.device is dev
        if dev.mem_regions:
            assert dev.default_mem_region() in dev.mem_regions.values()
            c = dev.malloc(64)
            assert c.is_on(dev.default_mem_region())
            c.free()
        else:
            with expect_error(ErrorCode.WRONG_TYPE):
                dev.default_mem_region()
        if dev.reg_regions:
            assert dev.default_reg_region() in dev.reg_regions.values()
        else:
            with expect_error(ErrorCode.WRONG_TYPE):
                dev.default_reg_region()
        with expect_error(ErrorCode.WRONG_TYPE):
            dev.get_mem_region("no-such-region")
        with expect_error(ErrorCode.WRONG_TYPE):
            dev.get_reg_region("no-such-region")


def check_device_close(make_device: DeviceFactory) -> None:
    """close() is idempotent; afterwards the device and its regions raise 11012."""
    dev = make_device()
    mems = list(dev.mem_regions.values())
    regs = list(dev.reg_regions.values())
    chunk = mems[0].malloc(16) if mems else None
    with dev:
        pass
    assert dev.closed
    dev.close()
    with expect_error(ErrorCode.WRONG_ORDER):
        dev.get_mem_region("anything")
    for m in mems:
        assert m.closed
        with expect_error(ErrorCode.WRONG_ORDER):
            m.read(bytearray(1), m.base)
        with expect_error(ErrorCode.WRONG_ORDER):
            m.malloc(1)
    for r in regs:
        assert r.closed
        with expect_error(ErrorCode.WRONG_ORDER):
            r.read(r.base)
        with expect_error(ErrorCode.WRONG_ORDER):
            r.execute([RegRead(r.base)])
    if chunk is not None:
        with expect_error(ErrorCode.WRONG_ORDER):
            chunk.write(b"x")


def check_device_irq(make_device: DeviceFactory) -> None:
    """wait_irq: 11012 on devices without an interrupt line, a bool on the others."""
    with make_device() as dev:
        with expect_error(ErrorCode.OUT_OF_RANGE):
            dev.wait_irq(-1)
        if dev.has_irq:
            assert isinstance(dev.wait_irq(0.0), bool)
        else:
            with expect_error(ErrorCode.WRONG_ORDER):
                dev.wait_irq(0.0)


DEVICE_CHECKS: tuple[Callable[[DeviceFactory], None], ...] = (
    check_device_regions,
    check_device_close,
    check_device_irq,
)
