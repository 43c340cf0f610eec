"""Device: URLs, the registry, regions by name and default, closing, the host device."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from xrt import (
    Device,
    DeviceURL,
    ErrorCode,
    HostDevice,
    HostMemRegion,
    XrtError,
    register_device,
    registered_devices,
)
from xrt.device import unregister_device
from xrt.testing.memory_transport import MemoryDevice, MemoryMemRegion, MemoryRegRegion


def raises(code: ErrorCode) -> pytest.RaisesContext:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


def test_url_of_the_manual() -> None:
    url = DeviceURL.parse("axi://ql100aiu?npu=0x40000000&dma=0x80000000")
    assert (url.scheme, url.host, url.port, url.path) == ("axi", "ql100aiu", None, "")
    assert dict(url.params) == {"npu": 0x4000_0000, "dma": 0x8000_0000}
    assert url.get_int("npu") == 0x4000_0000 and url.get_int("ocm", 7) == 7
    assert str(url) == "axi://ql100aiu?npu=0x40000000&dma=0x80000000"


def test_url_forms() -> None:
    url = DeviceURL.parse("GRPC://Emu.Example:50051/npu0?timeout=2.5&id=12&name=a+b&flag")
    assert (url.scheme, url.host, url.port, url.path) == ("grpc", "emu.example", 50051, "/npu0")
    assert dict(url.params) == {"timeout": "2.5", "id": 12, "name": "a b", "flag": ""}
    assert DeviceURL.parse("host://").host is None
    assert DeviceURL.parse("grpc://[::1]:7/").host == "::1"
    assert DeviceURL.parse("x://h?n=-3&o=0o17&b=0b101").params == {"n": -3, "o": 15, "b": 5}
    with raises(ErrorCode.WRONG_TYPE):
        url.get_int("timeout")
    for bad in ("ql100aiu", "axi:ql100aiu", "", "://x", "grpc://h:99999", "axi://h?a=1&a=2"):
        with raises(ErrorCode.OUT_OF_RANGE):
            DeviceURL.parse(bad)
    with raises(ErrorCode.WRONG_TYPE):
        DeviceURL.parse(b"host://")  # type: ignore[arg-type]
    # A pasted prefix: named, with the form to write.
    with pytest.raises(XrtError, match=r"'grpc://grpc://127.0.0.1:50051' has two schemes"):
        DeviceURL.parse("grpc://grpc://127.0.0.1:50051")
    assert DeviceURL.parse("labgrid://p?coordinator=ws://h:1").params["coordinator"] == "ws://h:1"


@pytest.fixture
def scheme(request: pytest.FixtureRequest) -> Iterator[str]:
    name = "t" + request.node.name.replace("_", "")[:20].lower()
    yield name
    unregister_device(f"{name}://")
    unregister_device(f"{name}://special")


def test_registry(scheme: str) -> None:
    seen: list[DeviceURL] = []

    @register_device(f"{scheme}://")
    class Generic(Device):
        def __init__(self, url: DeviceURL) -> None:
            super().__init__(url)
            seen.append(url)

    @register_device(f"{scheme}://special")
    def special(url: DeviceURL) -> Device:
        return HostDevice(url)

    assert f"{scheme}://" in registered_devices() and "host://" in registered_devices()
    dev = Device.open(f"{scheme}://board?npu=0x40000000")
    assert isinstance(dev, Generic) and seen[-1].params["npu"] == 0x4000_0000
    assert dev.url is seen[-1]
    assert isinstance(Device.open(f"{scheme}://special/x"), HostDevice)
    with raises(ErrorCode.WRONG_TYPE):
        register_device(f"{scheme}://")(HostDevice)
    register_device(f"{scheme}://", replace=True)(HostDevice)
    assert isinstance(Device.open(f"{scheme}://any"), HostDevice)
    register_device(f"{scheme}://", replace=True)(lambda url: "not a device")
    with raises(ErrorCode.WRONG_TYPE):
        Device.open(f"{scheme}://any")
    with raises(ErrorCode.OUT_OF_RANGE):
        register_device(f"{scheme}://h/path")
    with raises(ErrorCode.OUT_OF_RANGE):
        register_device(f"{scheme}://h?x=1")
    with raises(ErrorCode.WRONG_TYPE):
        register_device(f"{scheme}://other")(42)  # type: ignore[arg-type]


def test_unknown_scheme_lists_the_registered_ones() -> None:
    with raises(ErrorCode.WRONG_TYPE) as e:
        Device.open("nosuchscheme://board")
    assert "nosuchscheme://board" in e.value.message and "host://" in e.value.message


def test_regions_by_name_and_default() -> None:
    dev = Device("custom://")
    a = MemoryMemRegion("plddr", 0, 1 << 16, host_visible=False)
    b = MemoryMemRegion("udma", 1 << 20, 1 << 16)
    npu = MemoryRegRegion("npu", 0x4000_0000, 0x100)
    dev.add_region(a)
    dev.add_region(b)
    dev.add_region(npu)
    assert dev.default_mem_region() is a and dev.default_reg_region() is npu
    assert dev.set_default_mem_region("udma") is dev and dev.default_mem_region() is b
    assert dict(dev.mem_regions) == {"plddr": a, "udma": b} and dict(dev.reg_regions) == {
        "npu": npu
    }
    assert dev.malloc(16).is_on(b) and dev.malloc(16, region="plddr").is_on(a)
    dev.write_reg(0x4000_0010, 0xABC)
    assert dev.read_reg(0x10, True) == 0xABC == dev.read_reg(0x10, True, region="npu")
    with raises(ErrorCode.WRONG_TYPE):
        dev.add_region(MemoryMemRegion("npu", 0, 4096))
    with raises(ErrorCode.WRONG_TYPE):
        dev.add_region("plddr")  # type: ignore[arg-type]
    with raises(ErrorCode.WRONG_ORDER):
        Device("other://").add_region(a)
    with raises(ErrorCode.WRONG_TYPE):
        dev.set_default_reg_region("plddr")
    with raises(ErrorCode.WRONG_TYPE):
        dev.get_mem_region(3)  # type: ignore[arg-type]
    assert repr(dev) == "<Device 'custom://'>"
    dev.close()
    assert repr(dev) == "<Device 'custom://' closed>"
    with raises(ErrorCode.WRONG_ORDER):
        dev.add_region(MemoryMemRegion("late", 0, 4096))
    with raises(ErrorCode.WRONG_ORDER):
        dev.read_reg(0x4000_0010)


def test_close_reports_hook_failures_after_closing_everything() -> None:
    class Flaky(Device):
        def _close(self) -> None:
            raise OSError("socket already gone")

    dev = Flaky()
    region = MemoryMemRegion("m", 0, 4096)
    dev.add_region(region)
    with pytest.raises(OSError, match="socket already gone"):
        dev.close()
    assert dev.closed and region.closed
    dev.close()  # idempotent: nothing raised the second time


def test_memory_device_from_url() -> None:
    dev = Device.open("mem://board?npu=0x50000000&plddr_size=0x10000&ocm_size=0x8000&align=16")
    assert isinstance(dev, MemoryDevice)
    assert dev.get_reg_region("npu").base == 0x5000_0000
    assert dev.get_reg_region("dma").base == 0x8000_0000
    assert dev.default_mem_region().name == "plddr" and dev.default_mem_region().size == 0x10000
    assert dev.get_mem_region("ocm").size == 0x8000 and dev.get_mem_region("udma").host_visible
    npu = dev.default_reg_region()
    assert npu.regmap is not None and npu.regmap.name == "npu"
    assert npu.regs.MAGIC.read() == npu.regmap.register("MAGIC").reset != 0
    assert dev.malloc(3).begin.addr % 16 == 0
    dev.close()


def test_host_device() -> None:
    d = HostDevice.default()
    assert HostDevice.default() is d and isinstance(d.default_mem_region(), HostMemRegion)
    assert HostDevice.default_region() is d.default_mem_region()
    d.close()
    assert not d.closed, "the process-wide host device stays open"
    with raises(ErrorCode.WRONG_TYPE):
        d.default_reg_region()
    with raises(ErrorCode.WRONG_ORDER):
        d.wait_irq(0.1)
    assert not d.has_irq
    with Device.open("host://?capacity=4096") as mine:
        assert isinstance(mine, HostDevice) and mine is not d
        with raises(ErrorCode.OUT_OF_RANGE):
            mine.malloc(5000)
        chunk = mine.malloc(4000)
    assert mine.closed
    with raises(ErrorCode.WRONG_ORDER):
        chunk.write(b"x")
    with raises(ErrorCode.WRONG_TYPE):
        Device.open("host://?capacity=big")


def test_host_device_default_is_one_object_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HostDevice, "_default", None)
    got: list[HostDevice] = []
    barrier = threading.Barrier(8)

    def grab() -> None:
        barrier.wait()
        got.append(HostDevice.default())

    threads = [threading.Thread(target=grab) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(g is got[0] for g in got)
