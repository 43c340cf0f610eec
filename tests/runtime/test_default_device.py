"""``Device()`` opens the default device, and URL schemes come from entry points.

`default_device_url` is ``$XRT_DEVICE`` or ``sim://buyi``; a scheme nobody registered is
looked up among the ``xrt.devices`` entry points, loaded once and registered. Where the
installed entry points must be something else (none, a broken one, another scheme), a
fresh interpreter stands ``importlib.metadata.entry_points`` in for the installed metadata
before ``xrt`` is imported: the lookup the registry really makes, with other answers.
No simulator here (tests/emulator/test_sim_device.py opens ``sim://``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xrt import Device, ErrorCode, HostDevice, XrtError
from xrt.device import (
    DEFAULT_DEVICE_ENV,
    EMBEDDED_DEVICE_URL,
    ENTRY_POINT_GROUP,
    default_device_url,
)

REPO = Path(__file__).resolve().parents[2]

# Run first in the child: the entry points of ENTRY_POINT_GROUP become those of ENTRY_POINTS
# (a list of (name, value)), whatever is installed; every lookup is counted.
_STAND_IN = textwrap.dedent(
    """
    import importlib.metadata as md
    _real = md.entry_points
    LOOKUPS = []

    def _entry_points(**kw):
        if kw.get("group") != "xrt.devices":
            return _real(**kw)
        LOOKUPS.append(1)
        return md.EntryPoints(md.EntryPoint(n, v, "xrt.devices") for n, v in ENTRY_POINTS)

    md.entry_points = _entry_points
    """
)


def _child(entry_points: list[tuple[str, str]], body: str, **env: str) -> str:
    """Run `body` in a fresh interpreter with `entry_points` installed; its stdout."""
    code = f"ENTRY_POINTS = {entry_points!r}\n{_STAND_IN}\n{textwrap.dedent(body)}"
    full_env = {k: v for k, v in os.environ.items() if k != DEFAULT_DEVICE_ENV}
    full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=full_env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_default_url_is_xrt_device_else_the_embedded_simulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DEFAULT_DEVICE_ENV, raising=False)
    assert default_device_url() == EMBEDDED_DEVICE_URL == "sim://buyi"
    assert default_device_url("zg330") == "sim://zg330"  # the embedded one of a target
    monkeypatch.setenv(DEFAULT_DEVICE_ENV, "  ")
    assert default_device_url() == "sim://buyi"
    monkeypatch.setenv(DEFAULT_DEVICE_ENV, " grpc://10.0.0.7:50051/npu1 ")
    assert default_device_url() == default_device_url("zg330") == "grpc://10.0.0.7:50051/npu1"


def test_device_without_argument_opens_xrt_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEFAULT_DEVICE_ENV, "host://?capacity=4096")
    dev = Device()
    assert type(dev) is HostDevice and dev.url is not None and dev.url.raw.startswith("host://")
    assert dev.default_mem_region().size == 4096
    dev.close()
    monkeypatch.setenv(DEFAULT_DEVICE_ENV, "nosuch://board")
    with pytest.raises(XrtError) as e:
        Device()
    assert e.value.code == ErrorCode.WRONG_TYPE and "nosuch://board" in e.value.message


def test_constructors_with_arguments_and_subclasses_are_unchanged() -> None:
    bare = Device("custom://")
    assert type(bare) is Device and not bare.mem_regions and bare.url is not None
    host = HostDevice()
    assert type(host) is HostDevice and host.default_mem_region().name == "host"
    assert type(Device(None)) is Device  # an explicit argument is a device made by hand
    for dev in (bare, host):
        dev.close()


def test_the_installed_entry_point_names_sim() -> None:
    """The unknown-scheme error lists the entry points found (the emulator's ``sim``)."""
    with pytest.raises(XrtError) as e:
        Device.open("nosuch://board")
    message = e.value.message
    assert "registered:" in message and "host://" in message
    assert f"entry points of {ENTRY_POINT_GROUP}: " in message
    assert "sim (npuemu.embedded:open_sim)" in message


def test_without_the_sim_entry_point_device_says_what_to_do_in_one_line() -> None:
    out = _child(
        [],
        """
        from xrt import Device, XrtError
        try:
            Device()
        except XrtError as exc:
            print(int(exc.code))
            print(exc.message)
        """,
    )
    code, message, *rest = out.splitlines()
    assert not rest and code == "11010"
    assert message == (
        "no default device: set XRT_DEVICE=grpc://HOST:PORT (or another device URL) or "
        "install the emulator (pip install 'npu-emu[emulator]')"
    )


def test_an_entry_point_that_fails_to_load_is_named_in_the_same_line() -> None:
    out = _child(
        [("sim", "no_such_emulator_module:open_sim")],
        """
        from xrt import Device, XrtError
        for _ in range(2):
            try:
                Device()
            except XrtError as exc:
                print(exc.message)
        try:
            Device.open("sim://buyi")
        except XrtError as exc:
            print(exc.message)
        print(len(LOOKUPS))
        """,
    )
    first, second, opened, lookups = out.splitlines()
    assert first == second and first.startswith("no default device: set XRT_DEVICE=")
    assert "pip install 'npu-emu[emulator]'" in first
    assert "no_such_emulator_module:open_sim: ModuleNotFoundError" in first
    assert "sim failed to load: no_such_emulator_module:open_sim" in opened
    assert lookups == "2"  # one load (kept), one listing for the error


def test_an_entry_point_registers_its_scheme_once() -> None:
    out = _child(
        [("hostlike", "xrt.device:HostDevice")],
        """
        import xrt
        assert "hostlike://" not in xrt.registered_devices()
        a = xrt.Device.open("hostlike://?capacity=1024")
        b = xrt.Device.open("hostlike://")
        print(type(a).__name__, a.default_mem_region().size, type(b).__name__)
        print("hostlike://" in xrt.registered_devices(), len(LOOKUPS))
        """,
    )
    assert out.splitlines() == ["HostDevice 1024 HostDevice", "True 1"]
