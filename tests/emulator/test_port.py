"""The device port's records (`xrt.hw.port`) and their encodings: one encoding of a register
batch on every route (the pipe's map, the ring's records, the wire's messages), replies
and errors typed, the worker's configuration one record."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npuemu.worker.config import WorkerConfig
from npuemu.worker.protocol import decode, frame
from xrt.hw.port import (
    Advance,
    Cancel,
    DeviceEvent,
    Done,
    ModelRestore,
    ModelSave,
    PortError,
    PortErrorCode,
    PristineRestore,
    PristineSave,
    Quit,
    RegBatch,
    RegResults,
    Remap,
    Reply,
    ReplyBody,
    Request,
    Reset,
    RingAttach,
    RingDetach,
    StateSaved,
    StateTime,
    TapFlush,
    WaitIrq,
    WaitResult,
    WatchRings,
    WavesForget,
    WavesStart,
    WavesState,
    WavesStatus,
    WavesStop,
    WavesWindow,
    read_only_refusal,
)
from xrt.hw.port_pipe import (
    decode_event,
    decode_reply,
    decode_request,
    encode_event,
    encode_reply,
    encode_request,
)
from xrt.hw.port_wire import WireOpError, batch_of_pb, batch_to_pb, results_of_pb, results_to_pb
from xrt.hw.regops import MASK32, RegKind, RegMaskedWrite, RegPoll, RegRead, RegWrite, to_row
from xrt.hw.ring import RingSlot
from xrt.hw.wire import RegisterStatus, pb

rows = st.lists(
    st.tuples(
        st.sampled_from(list(RegKind)),
        st.integers(0, MASK32),
        st.integers(0, MASK32),
        st.integers(0, MASK32),
        st.integers(0, MASK32),
        st.integers(1, 1 << 40),
    ),
    min_size=1,
    max_size=64,
)


def _through_the_pipe(message: dict) -> dict:
    """What the other end of the pipe decodes (msgpack, bounded: `npuemu.worker.protocol`)."""
    return decode(frame(message)[4:])


@given(rows)
def test_a_batch_is_one_encoding_on_every_route(batch_rows) -> None:
    batch = RegBatch.of_rows(batch_rows)
    # the pipe
    req_id, back, read_only = decode_request(_through_the_pipe(encode_request(7, batch)))
    assert (req_id, back, read_only) == (7, batch, False)
    # the ring's records are the batch's own; the wire's messages carry the same ops (each
    # op's fields that its kind uses)
    assert batch.rows() == [tuple(r) for r in batch_rows]
    assert batch_of_pb(batch_to_pb("lease", batch).ops) == RegBatch.of_rows(
        [_as_the_wire_carries(*r) for r in batch_rows]
    )


def _as_the_wire_carries(kind, addr, value, mask, expected, cycles):
    return {
        RegKind.READ: (kind, addr, 0, MASK32, 0, 0),
        RegKind.WRITE: (kind, addr, value, MASK32, 0, 0),
        RegKind.MASKED_WRITE: (kind, addr, value, mask, 0, 0),
        RegKind.POLL: (kind, addr, 0, mask, expected, cycles),
    }[kind]


def test_the_data_models_ops_make_the_rows_to_row_makes() -> None:
    ops = [
        RegRead(0x4000_0000),
        RegWrite(0x4000_0040, 0x1234),
        RegMaskedWrite(0x8000_0010, 0xFF, 0x0F),
        RegPoll(0x8000_0004, 1, 0, max_polls=5),
    ]
    assert RegBatch.of_ops(ops).rows() == [to_row(op) for op in ops]
    assert RegBatch.read(0x40) == RegBatch.of_rows([(RegKind.READ, 0x40, 0, MASK32, 0, 0)])
    assert RegBatch.of_ops(ops).polls() == [(3, to_row(ops[3]).max_cycles)]


def test_bad_batches_are_refused_naming_the_op() -> None:
    with pytest.raises(ValueError, match="unknown register operation kind 9"):
        RegBatch.of_rows([(9, 0, 0, 0, 0, 0)])
    with pytest.raises(ValueError, match="out of range"):
        RegBatch.of_rows([(RegKind.READ, 1 << 33, 0, 0, 0, 0)])
    with pytest.raises(ValueError, match="unknown request 'nope'"):
        decode_request({"id": 1, "t": "nope"})
    with pytest.raises(ValueError, match="max_cycles is str"):
        decode_request({"id": 1, "t": "wait_irq", "max_cycles": "x", "wall_s": 1.0})
    ops = batch_to_pb("l", RegBatch.read(0x40)).ops
    ops.add()  # an empty op
    with pytest.raises(WireOpError, match="op 1: empty"):
        batch_of_pb(ops)
    big = pb.RegisterBatchRequest(ops=[pb.RegisterOp(read=pb.RegisterRead(address=1 << 40))])
    with pytest.raises(WireOpError, match="op 0: register address 0x10000000000 is past 32 bits"):
        batch_of_pb(big.ops)
    checked: list[tuple[int, int]] = []
    batch_of_pb(batch_to_pb("l", RegBatch.read(0x40)).ops, lambda i, a: checked.append((i, a)))
    assert checked == [(0, 0x40)]


# One example of every request and reply body; the coverage tests below fail when a record
# type is added to the port without one here.
REQUESTS = [
    RegBatch.of_rows([(RegKind.READ, 0x40, 0, 0, 0, 1), (RegKind.WRITE, 0x44, 7, 0, 0, 1)]),
    WaitIrq(1000, 2.5),
    Reset(),
    ModelSave("/tmp/x", 10, (0x4000_0040, 0x8000_0010)),
    ModelRestore("/tmp/x"),
    PristineSave(),
    PristineRestore(),
    Remap((3, 4096)),
    RingAttach(RingSlot.SERVER),
    RingDetach(),
    WavesStart(5000),
    WavesStop(),
    WavesStatus(),
    WavesForget(),
    Advance(None),
    Advance(123),
    TapFlush(),
    WatchRings(True),
    WatchRings(False),
    Cancel(5),
    Quit(),
]
REPLIES = [
    Reply(1, 100, 5000, RegResults.of([(1, 0x1234, 3), (2, 0, 1)])),
    Reply(2, 100, None, WaitResult(1, 77)),
    Reply(3, 9, 1, StateSaved(1000, ((1, 5), (1, 6)))),
    Reply(4, 9, 1, WavesWindow(("/w.fst", 1, 2), "stopped")),
    Reply(5, 9, 1, WavesState("recording", 40)),
    Reply(6, 9, 1, StateTime(123_000)),
    Reply(7, 9, 1, Done()),
    Reply(8, 9, 1, None, PortError(PortErrorCode.BAD_STATE, "not this model's")),
    Reply(9, 9, None, cancelled=True),
]


def test_every_record_type_has_an_example_here() -> None:
    assert {type(r) for r in REQUESTS} == set(get_args(Request))
    assert {type(r.body) for r in REPLIES if r.body is not None} == set(get_args(ReplyBody))


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: r.TAG)
@pytest.mark.parametrize("read_only", [False, True])
def test_every_request_crosses_the_pipe_as_itself(request_: Request, read_only: bool) -> None:
    got = decode_request(_through_the_pipe(encode_request(3, request_, read_only=read_only)))
    assert got[1:] == (request_, read_only)


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: str(r.id))
def test_every_reply_crosses_the_pipe_as_itself(reply: Reply) -> None:
    assert decode_reply(_through_the_pipe(encode_reply(reply))) == reply


def test_a_device_event_crosses_the_pipe_as_itself() -> None:
    event = DeviceEvent("dma_error", 1234, 40, "DMA error SRC_RANGE at 0xf0000000")
    msg = _through_the_pipe(encode_event(event))
    assert msg["ev"] == "device" and decode_event(msg) == event
    with pytest.raises(ValueError, match="cycle is str"):
        decode_event({**msg, "cycle": "12"})
    with pytest.raises(ValueError, match=r"watch_rings\.on is int"):
        decode_request({"id": 1, "t": "watch_rings", "on": 1})


def test_results_on_the_wire() -> None:
    results = RegResults.of([(RegisterStatus.OK, 7, 3), (RegisterStatus.SLVERR, 0, 2)])
    assert results_of_pb(results_to_pb(results, 99)) == results.pairs()
    assert not results.all_ok and len(results) == 2
    with pytest.raises(TypeError, match="RegResults, not WaitResult"):
        Reply(1, 0, 0, results).body_as(WaitResult)


def test_an_unknown_error_code_is_the_workers_own() -> None:
    got = decode_reply({"id": 1, "cycles": 0, "error": ("from-the-future", "what")})
    assert got.error == PortError(PortErrorCode.INTERNAL, "what")


def test_an_observer_may_only_read() -> None:
    assert read_only_refusal(RegBatch.read(0x40), {}) == ""
    assert "latches" in read_only_refusal(RegBatch.read(0x40), {0x40: "latches it"})
    assert read_only_refusal(RegBatch.write(0x40, 1), {}) == "op 0 is a write, not a read"
    assert "not a read-only request" in read_only_refusal(WaitIrq(1, 1.0), {})


def test_the_workers_configuration_is_one_record() -> None:
    config = WorkerConfig(target="zg330", device="npu3", waves_dir="/w", lockstep=True, taps=True)
    text = config.encode()
    assert "lockstep=1" in text.splitlines()  # the C++ side reads this one line
    assert WorkerConfig.decode(text) == config
    with pytest.raises(ValueError, match="unknown setting 'colour=red'"):
        WorkerConfig.decode("colour=red")
    with pytest.raises(ValueError, match="taps='yes' is not 0 or 1"):
        WorkerConfig.decode("taps=yes")
    with pytest.raises(ValueError, match="no newline"):
        WorkerConfig(waves_dir="/a\nlockstep=1")
    with pytest.raises(ValueError, match="reg_master"):
        dataclasses.replace(config, reg_master="fast")
