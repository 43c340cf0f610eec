"""What a client sees of refusals and failures: each becomes the XrtError of the table in
docs/runtime-transports.md (`xrt.transport.grpc.errors`), naming what went wrong.

The server's side of these (leases, auth, worker crashes, malformed requests) is tested in
tests/emulator; here only the runtime's view of them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator

import pytest

from npuemu.server.launch import ServerProcess
from xrt import Device, ErrorCode, RegRead, XrtError
from xrt.hw.regs import DMA
from xrt.npu_device import DmaMemRegion, NpuDevice
from xrt.transport import grpc as grpc_transport
from xrt.transport.grpc import GrpcTransport
from xrt.transport.grpc import lease as grpc_lease


def raises(code: ErrorCode) -> pytest.RaisesExc:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


# -- addresses -----------------------------------------------------------------------------


def test_bad_addresses_are_refused_before_the_wire(buyi: NpuDevice) -> None:
    plddr, udma = buyi.get_mem_region("plddr"), buyi.get_mem_region("udma")
    npu = buyi.get_reg_region("npu")
    with raises(ErrorCode.OUT_OF_RANGE):
        plddr.write(plddr.end - 1, b"ab")
    with raises(ErrorCode.OUT_OF_RANGE):
        udma.read(bytearray(1), udma.base - 1)
    with raises(ErrorCode.OUT_OF_RANGE):
        npu.read(npu.end)
    with raises(ErrorCode.OUT_OF_RANGE):
        npu.read(npu.base + 2)


def test_the_server_refuses_what_the_client_lets_through(buyi: NpuDevice) -> None:
    """A region whose window the server does not serve (a client with a wrong memory map):
    OUT_OF_RANGE from the server is 11003, naming the server's reason."""
    t = buyi.transport
    assert isinstance(t, GrpcTransport)
    with raises(ErrorCode.OUT_OF_RANGE) as e:
        t.read_memory(0x1_0000_0000, 16)  # plddr is not host-visible
    assert (
        "outside the host-visible region" in e.value.message and "OUT_OF_RANGE" in e.value.message
    )


def test_unmapped_register_is_a_device_error_naming_the_address(buyi: NpuDevice) -> None:
    """Inside the block but no register there: the CSR block answers SLVERR -> 11014, for a
    single access and in a batch alike."""
    dma = buyi.get_reg_region("dma")
    hole = dma.base + 0x2C  # between INT_RAW and SRC_LO
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        dma.read(hole)
    assert "0x8000002c" in e.value.message
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        dma.write(dma.base + DMA.register("MAGIC").offset, 0)  # read-only
    assert "0x80000000" in e.value.message
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        dma.execute([RegRead(dma.base), RegRead(hole), RegRead(dma.base)])
    assert "(op 1)" in e.value.message and "0x8000002c" in e.value.message
    assert "SLVERR" in e.value.message


def test_dma_errors_surface_from_memory_regions(buyi: NpuDevice) -> None:
    """A DMA that fails is 11014 naming the engine's ERR_CODE and address; the engine is
    usable afterwards. (Regions that claim memory the hardware does not have: ocm on Buyi,
    and a window running past the end of plddr.)"""
    eng = buyi.dma_engine
    ghost = DmaMemRegion("ocm-on-buyi", 0xF000_0000, 1 << 20, eng)
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        ghost.write(ghost.base + 16, b"nowhere")
    assert "DST_RANGE at 0xf0000010" in e.value.message
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        ghost.read(bytearray(8), ghost.base)
    assert "SRC_RANGE at 0xf0000000" in e.value.message
    plddr = buyi.get_mem_region("plddr")
    overrun = DmaMemRegion("overrun", plddr.end - 4096, 8192, eng)
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        overrun.write(overrun.base, bytes(8192))
    assert "DST_RANGE" in e.value.message
    plddr.write(plddr.base, b"still works")
    out = bytearray(11)
    plddr.read(out, plddr.base)
    assert out == b"still works"
    assert buyi.wait_irq(0.0) is False  # the failed transfers were acknowledged


# -- leases --------------------------------------------------------------------------------


def test_lease_refusals(open_buyi: Callable[..., NpuDevice], buyi_url: str) -> None:
    open_buyi(device="npu0")
    with raises(ErrorCode.WRONG_ORDER) as e:
        Device.open(f"{buyi_url}/npu0")
    assert "npu0 is leased by xrt:" in e.value.message
    open_buyi()  # the first free one: npu1
    with raises(ErrorCode.WRONG_ORDER) as e:
        Device.open(buyi_url)
    assert "no free device" in e.value.message
    with raises(ErrorCode.FILE_NOT_FOUND) as e:
        Device.open(f"{buyi_url}/npu9")
    assert "npu9" in e.value.message and "npu0, npu1" in e.value.message


def test_lease_ended_under_the_client_is_wrong_order(open_buyi: Callable[..., NpuDevice]) -> None:
    """Someone ends our lease (here: a raw CloseDevice with its id): the next call is
    ABORTED -> 11012, telling why."""
    dev = open_buyi()
    t = dev.transport
    assert isinstance(t, GrpcTransport)
    t.call(
        "CloseDevice",
        grpc_transport.pb.CloseDeviceRequest(lease_id=t.lease_id),
        "closing behind the device's back",
        timeout=30,
    )
    with raises(ErrorCode.WRONG_ORDER) as e:
        dev.read_reg(0x4000_0000)
    assert "has ended" in e.value.message and "ABORTED" in e.value.message
    dev.close()  # still closes cleanly


def test_a_killed_client_loses_its_lease(
    buyi_url: str, open_buyi: Callable[..., NpuDevice]
) -> None:
    """The HoldLease stream dies with the process: the device is free again without any
    time-to-live passing."""
    script = textwrap.dedent(
        f"""
        import sys, time, xrt
        dev = xrt.Device.open({buyi_url + "/npu1?ttl=3600"!r})
        print("open", flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        with raises(ErrorCode.WRONG_ORDER):
            Device.open(f"{buyi_url}/npu1")
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 60
    while True:  # the server notices the dead stream asynchronously
        try:
            dev = open_buyi(device="npu1")
            break
        except XrtError as exc:
            assert exc.code == ErrorCode.WRONG_ORDER
            assert time.monotonic() < deadline, "the lease of a killed client never ended"
            time.sleep(0.1)
    assert dev.name == "npu1"


# -- connection, auth, protocol --------------------------------------------------------------


def test_unreachable_server_is_a_device_error() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        Device.open(f"grpc://127.0.0.1:{port}")
    assert "UNAVAILABLE" in e.value.message and "connection refused" in e.value.message
    assert "npu-emu serve" in e.value.message and "retry" not in e.value.message


def test_protocol_mismatch_is_refused_clearly(
    buyi_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grpc_lease, "PROTOCOL_VERSION", 99)
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        Device.open(buyi_url)
    assert "protocol version 1, this runtime 99" in e.value.message


@pytest.fixture(scope="module")
def token_server(serve: Callable) -> Iterator[ServerProcess]:
    with serve(target="buyi", devices=1, token="s3cr3t-0x10") as srv:
        yield srv


def test_token(token_server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPU_EMU_TOKEN", raising=False)
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        Device.open(token_server.url)
    assert "missing token" in e.value.message and "NPU_EMU_TOKEN" in e.value.message
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        Device.open(token_server.url + "?token=wrong")
    assert "wrong token" in e.value.message
    with Device.open(token_server.url + "?token=s3cr3t-0x10") as dev:
        assert dev.read_reg(0x4000_0000) == 0x4E50_5530
    monkeypatch.setenv("NPU_EMU_TOKEN", "s3cr3t-0x10")
    with Device.open(token_server.url) as dev:
        plddr = dev.default_mem_region()
        plddr.write(plddr.base, b"token ok")


def test_server_gone_is_unavailable(serve: Callable) -> None:
    """The server dies under an open device: every call is 11014 saying that nothing
    listens there any more; close still works."""
    with serve(target="buyi", devices=1) as srv:
        dev = Device.open(srv.url)
        assert dev.read_reg(0x4000_0000) == 0x4E50_5530
    with raises(ErrorCode.DEVICE_INTERNAL) as e:
        dev.read_reg(0x4000_0000)
    assert "UNAVAILABLE" in e.value.message and "connection refused" in e.value.message
    with raises(ErrorCode.DEVICE_INTERNAL):
        dev.default_mem_region().write(dev.default_mem_region().base, b"x")
    dev.close()


def test_bad_urls(buyi_url: str) -> None:
    with raises(ErrorCode.OUT_OF_RANGE):
        Device.open("grpc://127.0.0.1")  # no port
    with raises(ErrorCode.OUT_OF_RANGE):
        Device.open(f"{buyi_url}/npu0/extra")
    with raises(ErrorCode.WRONG_TYPE) as e:
        Device.open(f"{buyi_url}?locl=0")
    assert "locl" in e.value.message and "local" in e.value.message
    with raises(ErrorCode.WRONG_TYPE):
        Device.open(f"{buyi_url}?local=2")
    with raises(ErrorCode.WRONG_TYPE):
        Device.open(f"{buyi_url}?ttl=soon")
    with raises(ErrorCode.OUT_OF_RANGE):
        Device.open(f"{buyi_url}?bounce=100")  # less than a page
    with raises(ErrorCode.WRONG_TYPE):
        Device.open(f"{buyi_url}?bounce=big")
    # None of the failed opens kept a lease.
    with Device.open(f"{buyi_url}/npu0"), Device.open(f"{buyi_url}/npu1"):
        pass


def test_a_dropped_device_releases_its_lease(buyi_url: str, open_buyi: Callable) -> None:
    """A device nobody closed: when it is garbage, its transport's finalizer ends the
    HoldLease stream and the server frees the device."""
    import gc

    dev = Device.open(f"{buyi_url}/npu1")
    t = dev.transport  # type: ignore[attr-defined]
    assert t.lease_alive
    del dev, t
    gc.collect()
    deadline = time.monotonic() + 60
    while True:
        try:
            again = open_buyi(device="npu1")
            break
        except XrtError as exc:
            # Still leased (11012), or being cleared for the next holder, which a busy
            # machine makes long enough to see (11014, "resetting; retry shortly").
            resetting = exc.code == ErrorCode.DEVICE_INTERNAL and "resetting" in str(exc)
            assert exc.code == ErrorCode.WRONG_ORDER or resetting, exc
            assert time.monotonic() < deadline, "a dropped device kept its lease"
            time.sleep(0.05)
    assert again.name == "npu1"


def test_worker_crash_is_unavailable_then_recovers(serve: Callable) -> None:
    """The simulation worker dies under an open device: the client sees 11014 with the
    retry hint, and once the server has restarted the worker the same device answers
    again (registers back at reset values, memory kept in its files). ``retry=0``: by
    default the runtime rides out a restart it meets (tests/emulator/test_retry.py), so
    whether the first read failed would depend on how soon the server saw the death."""
    import os
    import re
    import signal

    with serve(target="buyi", devices=1) as srv, Device.open(srv.url + "?retry=0") as dev:
        udma = dev.get_mem_region("udma")
        udma.write(udma.base, b"survives")
        dev.write_reg(0x4000_0040, 0x77)  # npu SCRATCH
        pid = int(re.findall(r"worker npu0 ready \(pid (\d+)\)", srv.log)[-1])
        os.kill(pid, signal.SIGKILL)
        with raises(ErrorCode.DEVICE_INTERNAL) as e:
            dev.read_reg(0x4000_0040)
        assert "UNAVAILABLE" in e.value.message and "retry" in e.value.message
        deadline = time.monotonic() + 60
        while True:
            try:
                value = dev.read_reg(0x4000_0040)
                break
            except XrtError as exc:
                assert exc.code == ErrorCode.DEVICE_INTERNAL and "retry" in exc.message
                assert time.monotonic() < deadline, "the worker never came back"
                time.sleep(0.2)
        assert value == 0
        out = bytearray(8)
        udma.read(out, udma.base)
        assert out == b"survives"
