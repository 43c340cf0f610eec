"""The pytest hooks and fixtures of the plugin (`npuemu.pytest_plugin` says what they do).

Nothing heavy is imported at module level: pytest loads this plugin in every run of the
environment it is installed in, and a run that uses none of its fixtures must not pay for
the runtime's import (or see `xrt` in `sys.modules`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from npuemu.server.launch import ServerProcess
    from xrt.npu_device import NpuDevice
    from xrt.session import Session

__all__ = [
    "farm_device",
    "npu_device",
    "npu_server",
    "npu_session",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
]

SECTION = "npu recording"
"""The failure report's section naming the kept recording."""

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
_RECORDING = pytest.StashKey[Path]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("npu-emu", "simulated NPU devices (npuemu.pytest_plugin)")
    group.addoption(
        "--npu-device",
        metavar="URL",
        default=None,
        help="the device every npu_device test opens (grpc://HOST:PORT, labgrid://PLACE, ...; "
        "default $XRT_DEVICE, else the embedded sim://TARGET of the test's npu mark, "
        "else sim://buyi)",
    )
    group.addoption(
        "--npu-wait",
        metavar="SECONDS",
        type=float,
        default=600.0,
        help="how long a test waits for a free grpc:// device (URLs without wait=; "
        "pytest-xdist workers share a server's devices this way; default 600)",
    )
    group.addoption(
        "--npu-recordings",
        metavar="DIR",
        type=Path,
        default=None,
        help="where recordings of failed tests are kept (default: npu-recordings/ beside the "
        "--junitxml file, else in the current folder)",
    )
    group.addoption(
        "--npu-keep-recordings",
        action="store_true",
        help="keep the recording of every test, not only of the failed ones",
    )
    group.addoption(
        "--npu-no-recordings",
        action="store_true",
        help="record nothing (a recording runs polls as loops of reads and maps no memory)",
    )
    group.addoption(
        "--npu-server-target",
        default=None,
        help="the target of the npu_server fixture's server (default $NPU_EMU_TARGET, else buyi)",
    )
    farm = parser.getgroup("npu-emu farm")
    farm.addoption(
        "--farm-tags",
        default=os.environ.get("NPU_FARM_TAGS", ""),
        help="tags of the farm place farm_device reserves, e.g. 'target=zg330' "
        "(default $NPU_FARM_TAGS)",
    )
    farm.addoption(
        "--farm-wait",
        type=float,
        default=600.0,
        help="seconds to wait for a free farm place (default 600)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "npu(target=None, fidelity=None, faults=()): the NPU the npu_device fixture opens "
        "(target: buyi or zg330; fidelity: cycle; faults: --fault texts armed on it)",
    )
    config.pluginmanager.register(_KeptRecordings(), "npu-emu-kept-recordings")


class _KeptRecordings:
    """The recordings kept, listed at the end of the run. Collected from the reports'
    sections, which travel from pytest-xdist's workers to the controller."""

    def __init__(self) -> None:
        self.kept: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.kept += [text for name, text in report.sections if name == SECTION]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.kept:
            terminalreporter.section("npu recordings (npu-emu replay FILE --check)")
            for line in self.kept:
                terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    recording = item.stash.get(_RECORDING, None)
    failed_here = report.failed and report.when in ("setup", "call")
    if recording is not None and failed_here and recording.exists():
        report.sections.append((SECTION, f"{item.nodeid}: kept {recording}"))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: the others may still be recording there
    folder = _recordings_folder(session.config)
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when no recording was kept in it


def _recordings_folder(config: pytest.Config) -> Path:
    folder: Path | None = config.getoption("npu_recordings")
    if folder is not None:
        return folder
    base = config.invocation_params.dir
    xml = getattr(config.option, "xmlpath", None)
    if xml:
        return (base / xml).parent / "npu-recordings"
    return base / "npu-recordings"


def _fail_usage(message: str) -> None:
    pytest.fail(message, pytrace=False)


@pytest.fixture
def npu_device(request: pytest.FixtureRequest) -> Iterator[NpuDevice]:
    """An opened NPU device, its own for the test: a new embedded ``sim://`` device or a new
    lease of ``--npu-device``/``$XRT_DEVICE``, closed (and so cleared) after the test.

    Its simulated cycles and NPU time go into the test's properties (``npu_cycles``,
    ``npu_time_us``: JUnit XML ``<property>``); its session is recorded, and the recording
    kept when the test fails (its path in the failure report).
    """
    import xrt
    from npuemu.pytest_plugin.choice import (
        RECORDING_SCHEMES,
        NpuMark,
        device_url,
        recording_name,
        with_param,
    )
    from xrt.device_url import DeviceURL
    from xrt.errors import XrtError
    from xrt.hw.targets import CLOCK_PERIOD_PS

    config, item = request.config, request.node
    try:
        marks = list(item.iter_markers("npu"))
        mark = NpuMark.from_kwargs(marks[0].args, marks[0].kwargs) if marks else NpuMark()
        url = device_url(config.getoption("npu_device"), mark)
        parsed = DeviceURL.parse(url)
    except XrtError as exc:
        _fail_usage(f"npu_device: {exc.message}")
        raise AssertionError from exc  # not reached: pytest.fail raises
    shown = url
    if parsed.scheme in ("grpc", "grpcs") and "wait" not in parsed.params:
        url = with_param(url, "wait", f"{config.getoption('npu_wait'):g}")
    recording = None
    wanted = not config.getoption("npu_no_recordings")
    if wanted and parsed.scheme in RECORDING_SCHEMES and "record" not in parsed.params:
        folder = _recordings_folder(config)
        folder.mkdir(parents=True, exist_ok=True)
        recording = folder / recording_name(item.nodeid)
        recording.unlink(missing_ok=True)  # an earlier run's
        url = with_param(url, "record", str(recording))
        item.stash[_RECORDING] = recording
    device = xrt.Device.open(url)
    start = end = None
    try:
        if mark.target is not None and device.target != mark.target:
            pytest.skip(f"needs a {mark.target} NPU; {shown} is a {device.target}")
        for spec in mark.faults:  # armed before the test's first access
            device.inject_fault(spec)
        start = device.cycles
        yield device
        end = device.cycles
    finally:
        device.close()
        if start is not None and end is not None:
            cycles = end - start
            item.user_properties.append(("npu_device", shown))
            item.user_properties.append(("npu_cycles", cycles))
            item.user_properties.append(("npu_time_us", cycles * CLOCK_PERIOD_PS / 1e6))
        if recording is not None:
            failed = any(r.failed for r in item.stash.get(_REPORTS, {}).values())
            if not failed and not config.getoption("npu_keep_recordings"):
                recording.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def npu_server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """A real ``npu-emu serve`` on loopback and a free port, one device, for the session (one
    per pytest-xdist worker); ``.url`` is its ``grpc://`` URL. Stopped at the session's end
    by its process id (SIGTERM, then SIGKILL)."""
    from npuemu.server.launch import ServerProcess
    from xrt.hw.targets import TARGETS

    target = (
        request.config.getoption("npu_server_target") or os.environ.get("NPU_EMU_TARGET") or "buyi"
    )
    if target not in TARGETS:
        raise pytest.UsageError(
            f"--npu-server-target {target!r}: no such NPU target (known: {', '.join(TARGETS)})"
        )
    server = ServerProcess.start(target=target, devices=1)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def npu_session(npu_device: NpuDevice) -> Iterator[Callable[..., Session]]:
    """``npu_session(network)``: an applied `xrt.Session` of the network on the test's NPU
    (its target's backend, the host for what the NPU does not run), closed after the test."""
    from xrt.backend import HostBackend
    from xrt.backend.npu import BuyiBackend, ZG330Backend
    from xrt.session import Session

    backend = {"buyi": BuyiBackend, "zg330": ZG330Backend}[str(npu_device.target)]
    made: list[Session] = []

    def make(network: Any) -> Session:
        session = Session.create([backend, HostBackend], network, [npu_device, None]).apply()
        made.append(session)
        return session

    try:
        yield make
    finally:
        for session in made:
            session.close()


@pytest.fixture(scope="session")
def farm_device(request: pytest.FixtureRequest) -> Iterator[Any]:
    """An emulated NPU held from the farm for the whole session, with the tags of
    ``--farm-tags`` (`npuemu.farm.fixtures.hold_farm_device`)."""
    from npuemu.farm.fixtures import hold_farm_device, parse_tags

    tags = parse_tags(request.config.getoption("farm_tags"))
    if not tags:
        raise pytest.UsageError("farm_device needs --farm-tags KEY=VALUE (or $NPU_FARM_TAGS)")
    with hold_farm_device(tags, wait_s=request.config.getoption("farm_wait")) as held:
        yield held.device
