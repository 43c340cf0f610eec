"""The wire's register values widened from uint32 to uint64 (the manual's ``uint64_t``)
without breaking anyone: a varint encodes a number the same whatever the declared width.

The old schema is rebuilt here from the new one, with every widened field back to uint32,
so both ends of each exchange are real protobuf codecs.
"""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from xrt.hw.port_wire import WireOpError, batch_of_pb
from xrt.hw.regops import MASK32, RegKind
from xrt.hw.wire import pb

WIDENED = {
    "ReadRegisterResponse": ("value",),
    "WriteRegisterRequest": ("value",),
    "RegisterWrite": ("value",),
    "RegisterMaskedWrite": ("value", "mask"),
    "RegisterPoll": ("mask", "expected"),
    "RegisterResult": ("value",),
    "ObserveReadRegisterResponse": ("value",),
}


def _old_classes() -> dict[str, type]:
    """The messages as protocol version 1 first declared them (register values uint32)."""
    proto = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(proto)
    proto.name = "npuemu/v1/device_old.proto"
    proto.package = "npuemu.v1old"
    del proto.service[:]
    for msg in proto.message_type:
        for f in msg.field:
            if f.type_name.startswith(".npuemu.v1."):
                f.type_name = f.type_name.replace(".npuemu.v1.", ".npuemu.v1old.", 1)
            if f.name in WIDENED.get(msg.name, ()):
                assert f.type == f.TYPE_UINT64, f"{msg.name}.{f.name} is not uint64"
                f.type = f.TYPE_UINT32
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"npuemu.v1old.{name}"))
        for name in (*WIDENED, "RegisterOp", "RegisterBatchRequest", "RegisterBatchResponse")
    }


OLD = _old_classes()


def test_every_register_value_on_the_wire_is_64_bit() -> None:
    for name, fields in WIDENED.items():
        desc = getattr(pb, name).DESCRIPTOR
        for f in fields:
            assert desc.fields_by_name[f].type == desc.fields_by_name[f].TYPE_UINT64, name


def test_an_old_clients_batch_decodes_and_runs_unchanged() -> None:
    old = OLD["RegisterBatchRequest"](lease_id="x")
    old.ops.add().write.CopyFrom(OLD["RegisterWrite"](address=0x4000_0010, value=MASK32))
    old.ops.add().masked_write.CopyFrom(
        OLD["RegisterMaskedWrite"](address=0x4000_0010, value=0x80, mask=0xF0)
    )
    old.ops.add().poll.CopyFrom(
        OLD["RegisterPoll"](address=0x4000_0010, mask=0xFFFF_0000, expected=0xFFFF_0000)
    )
    new = pb.RegisterBatchRequest.FromString(old.SerializeToString())
    rows = batch_of_pb(new.ops).rows()
    assert [(r.kind, r.addr, r.value, r.mask, r.expected) for r in rows] == [
        (RegKind.WRITE, 0x4000_0010, MASK32, MASK32, 0),
        (RegKind.MASKED_WRITE, 0x4000_0010, 0x80, 0xF0, 0),
        (RegKind.POLL, 0x4000_0010, 0, 0xFFFF_0000, 0xFFFF_0000),
    ]


def test_an_old_client_reads_the_servers_results() -> None:
    """Results from the widened server (32-bit registers: values below 2**32) decode in the
    old schema as the same numbers, byte for byte."""
    new = pb.RegisterBatchResponse(cycles=9)
    for value in (0, 1, 0x7FFF_FFFF, MASK32):
        new.results.add(status=1, value=value)
    old = OLD["RegisterBatchResponse"].FromString(new.SerializeToString())
    assert [r.value for r in old.results] == [0, 1, 0x7FFF_FFFF, MASK32]
    assert old.SerializeToString() == new.SerializeToString()
    single = OLD["ReadRegisterResponse"].FromString(
        pb.ReadRegisterResponse(value=MASK32, cycles=3).SerializeToString()
    )
    assert single.value == MASK32


@pytest.mark.parametrize(
    "op",
    [
        pb.RegisterOp(write=pb.RegisterWrite(address=0x4000_0010, value=1 << 32)),
        pb.RegisterOp(masked_write=pb.RegisterMaskedWrite(address=0x4000_0010, mask=1 << 63)),
        pb.RegisterOp(poll=pb.RegisterPoll(address=0x4000_0010, mask=1 << 32, expected=0)),
    ],
    ids=["write", "masked-write", "poll"],
)
def test_a_value_wider_than_the_registers_is_refused_not_truncated(op: pb.RegisterOp) -> None:
    with pytest.raises(WireOpError, match=r"op 0: register .* wider than the device's 32-bit"):
        batch_of_pb([op])
