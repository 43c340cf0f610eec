"""Client-side recording of an ``axi://`` session (``record=FILE``) against a file laid out
like /dev/mem (no simulator): what each access becomes in the recording, in order, with
its result; a poll of thousands of reads is one record; the URL's options are checked.
The replay of such a recording on the simulator: tests/emulator/test_board_recording.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_mmap_transport import DMA_BASE, NPU_BASE, board_file, put32

from xrt import Device, ErrorCode, XrtError
from xrt.hw.regops import MASK32, RegKind, RegPoll, RegWrite
from xrt.hw.regs import DMA, NPU
from xrt.hw.wire import RegisterStatus, WaitOutcome
from xrt.recording import INLINE_READ_BYTES, Kind, read_recording

OK = int(RegisterStatus.OK)
SCRATCH = DMA_BASE + DMA.offset("SRC_LO")  # a plain read/write register in a file
STATUS = DMA_BASE + DMA.offset("STATUS")


def raises(code: ErrorCode) -> pytest.RaisesExc:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


@pytest.fixture
def board(tmp_path: Path) -> Path:
    return board_file(tmp_path / "mem.bin")


def test_every_access_is_recorded_in_order_with_its_result(board: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.npurec"
    big = bytes(range(256)) * ((INLINE_READ_BYTES // 256) + 1)
    with Device.open(f"axi://b?file={board}&record={path}") as dev:
        npu, regs, udma = dev.get_reg_region("npu"), dev.get_reg_region("dma"), dev.udma
        magic = npu.read(NPU_BASE + NPU.offset("MAGIC"))
        regs.write(SCRATCH, 0x1234_5678)
        regs.write_masked(SCRATCH, 0xAB, 0xFF)
        with regs.batch() as b:
            b.read(SCRATCH)
            b.write(SCRATCH + 4, 7)
        put32(board, STATUS, 0x2)  # what the hardware shows: idle, with a flag
        assert regs.poll(STATUS, 0x1, 0) == 0x2
        udma.write(udma.base + 16, b"hello board")
        back = bytearray(11)
        udma.read(back, udma.base + 16)
        udma.write(udma.base + 4096, big)
        udma.read(bytearray(len(big)), udma.base + 4096)
        assert dev.wait_irq(0) is False  # a file raises no interrupt
    assert back == b"hello board"
    rec = read_recording(path)
    h = rec.header
    assert (h["clock"], h["origin"], h["target"], h["device"]) == ("wall", "client", "buyi", "b")
    assert h["blocks"]["dma"] == [DMA_BASE, 4096] and h["model"] is None
    assert rec.end is not None and rec.end["requests"] == len(rec.records) - 1
    kinds = [(r.kind, r.body.get("op")) for r in rec.records[:-1]]
    assert kinds == [
        (Kind.REQUEST, "batch"),  # the probe: npu MAGIC, TARGET
        (Kind.REQUEST, "batch"),  # dma MAGIC
        (Kind.REQUEST, "read_reg"),
        (Kind.REQUEST, "write_reg"),
        (Kind.REQUEST, "batch"),  # the masked write
        (Kind.REQUEST, "batch"),
        (Kind.POLL, None),
        (Kind.MEMORY_WRITE, None),
        (Kind.MEMORY_READ, None),
        (Kind.MEMORY_WRITE, None),
        (Kind.MEMORY_READ, None),
        (Kind.REQUEST, "wait_irq"),
    ]
    b = [r.body for r in rec.records]
    assert b[2]["args"] == {"addr": NPU_BASE} and b[2]["reply"] == {"status": OK, "value": magic}
    assert b[3]["args"] == {"addr": SCRATCH, "value": 0x1234_5678}
    masked = [RegKind.MASKED_WRITE, SCRATCH, 0xAB, 0xFF, 0, 0]
    assert b[4]["args"]["ops"] == [masked] and b[4]["reply"]["results"] == [[OK, 0x1234_56AB]]
    assert b[5]["args"]["ops"] == [
        [RegKind.READ, SCRATCH, 0, MASK32, 0, 0],
        [RegKind.WRITE, SCRATCH + 4, 7, MASK32, 0, 0],
    ]
    assert b[5]["reply"]["results"] == [[OK, 0x1234_56AB], [OK, 0]]
    poll = b[6]
    assert (poll["addr"], poll["mask"], poll["expected"]) == (STATUS, 1, 0)
    assert (poll["reads"], poll["value"], poll["matched"]) == (1, 0x2, True)
    assert b[7]["address"] == b[8]["address"] == 0x1000_0010
    assert b[7]["data"] == b[8]["data"] == b"hello board"
    assert b[9]["data"] == big and "data" not in b[10] and len(b[10]["sha256"]) == 64
    wait = b[11]
    assert wait["reply"]["outcome"] == WaitOutcome.DEADLINE and wait["args"]["timeout_s"] == 0
    assert all(x["t"] is None and x["c"] is None for x in b if x["k"] == Kind.REQUEST)
    ws = [x["w"] for x in b[:-1]]
    assert ws == sorted(ws) and ws[0] >= 0


def test_a_poll_of_thousands_of_reads_is_one_record(board: Path, tmp_path: Path) -> None:
    path = tmp_path / "p.npurec"
    with Device.open(f"axi://b?file={board}&record={path}&probe=0") as dev:
        regs = dev.get_reg_region("dma")
        with pytest.raises(XrtError, match="gave up after 5000 reads") as err:
            regs.execute([RegWrite(SCRATCH, 5), RegPoll(STATUS, 0x1, 0x1, max_polls=5000)])
        assert err.value.code == ErrorCode.TIMEOUT
        regs.write(SCRATCH, 9)
    rec = read_recording(path)
    kinds = [r.kind for r in rec.records]
    assert kinds == [Kind.REQUEST, Kind.POLL, Kind.REQUEST, Kind.END]
    first, poll, after = (r.body for r in rec.records[:3])
    assert first["args"]["ops"] == [[RegKind.WRITE, SCRATCH, 5, MASK32, 0, 0]]  # ran before
    assert (poll["reads"], poll["matched"], poll["value"], poll["max_polls"]) == (
        5000,
        False,
        0,
        5000,
    )
    assert after["op"] == "write_reg"


def test_record_options_are_checked(board: Path, tmp_path: Path) -> None:
    path = tmp_path / "r.npurec"
    path.write_bytes(b"")
    with raises(ErrorCode.DEVICE_INTERNAL) as err:  # never overwrites a file
        Device.open(f"axi://b?file={board}&record={path}")
    assert "cannot record the session" in err.value.message
    assert path.read_bytes() == b""
    with raises(ErrorCode.OUT_OF_RANGE):
        Device.open(f"axi://b?file={board}&record={tmp_path / 'x'}&record_max_mib=0")
    with raises(ErrorCode.WRONG_TYPE):
        Device.open(f"axi://b?file={board}&record_max_mib=4")
    with raises(ErrorCode.WRONG_TYPE):
        Device.open(f"axi://b?file={board}&recrod={tmp_path / 'y'}")  # a typo is not ignored
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_capped_recording_is_truncated_and_the_session_goes_on(
    board: Path, tmp_path: Path
) -> None:
    path = tmp_path / "cap.npurec"
    with Device.open(f"axi://b?file={board}&record={path}&record_max_mib=1&probe=0") as dev:
        udma = dev.udma
        chunk = b"\x5a" * (300 << 10)
        for i in range(5):
            udma.write(udma.base + i * len(chunk), chunk)
        back = bytearray(len(chunk))
        udma.read(back, udma.base + 4 * len(chunk))
    assert back == chunk  # the session is not disturbed by the cut
    rec = read_recording(path)
    assert rec.truncated is not None and rec.truncated.body["requests"] == 3
    assert rec.end is not None and rec.end["dropped"] == 3
    assert path.stat().st_size <= 1 << 20
