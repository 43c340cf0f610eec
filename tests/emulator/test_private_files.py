"""Files the emulator writes for a user hold the lease holder's data: recordings, waveform
windows, register traces and a replay's waveform file are created 0600, the folders the
server makes for them 0700, never through a symlink; a folder a user names that others may
write to is refused, or tightened when it is the user's own (issue 38, finding 8).

Real processes: ``npu-emu serve`` (`ServerProcess`) with ``--record``, ``--waves`` and
``--trace-registers``, a lease through the runtime, ``npu-emu replay --waves`` as a
subprocess.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.hw.regs import NPU
from xrt.hw.targets import target

pytestmark = pytest.mark.sim

SCRATCH = target("buyi").npu_base + NPU.register("SCRATCH").offset
UDMA = target("buyi").memory("udma").base


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@dataclass
class Served:
    root: Path
    record: Path
    waves: Path
    trace: Path
    recording: Path
    window: Path
    log: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server recording into a/b/recs and writing windows into w/waves (none of them
    there before), one lease that records a window, then the server stopped."""
    root = tmp_path_factory.mktemp("private")
    record, waves, trace = root / "a" / "b" / "recs", root / "w" / "waves", root / "regs.log"
    args = ("--record", str(record), "--waves", str(waves), "--trace-registers", str(trace))
    with ServerProcess.start(devices=1, extra_args=args) as srv:
        with Device.open(srv.url) as dev:
            t = dev.transport
            t.start_waves()
            t.write_memory(UDMA + 0x40, memoryview(b"holder's secret!"))
            dev.write_reg(SCRATCH, 0x1234, region="npu")
            assert dev.read_reg(SCRATCH, region="npu") == 0x1234
            window = t.stop_waves()
        log = srv.log
    (recording,) = record.glob("*.npurec")
    yield Served(root, record, waves, trace, recording, Path(window.path), log)


def test_the_record_and_waves_folders_are_made_0700(served: Served) -> None:
    r = served.root
    for folder in (r / "a", r / "a" / "b", served.record, r / "w", served.waves):
        assert mode(folder) == 0o700, (folder, oct(mode(folder)))


def test_recordings_wave_windows_and_traces_are_0600(served: Served) -> None:
    assert served.window.parent == served.waves and served.window.suffix == ".fst"
    assert served.window.stat().st_size > 0
    for path in (served.recording, served.window, served.trace):
        assert mode(path) == 0o600, (path, oct(mode(path)))
    # Nothing else the tracer made is left in the folder, open to others or not.
    assert list(served.waves.iterdir()) == [served.window]


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "npuemu.cli", "replay", *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "XRT_PROGRESS": "0"},
        check=False,
    )


def test_a_replays_waveform_file_is_0600_in_folders_made_0700(
    served: Served, tmp_path: Path
) -> None:
    out = tmp_path / "new" / "deeper" / "window.fst"
    done = replay(str(served.recording), "--waves", "0:400", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert mode(out) == 0o600 and out.stat().st_size > 0
    assert mode(tmp_path / "new") == 0o700 and mode(tmp_path / "new" / "deeper") == 0o700
    assert sorted(p.name for p in out.parent.iterdir()) == ["window.fst"]


def test_a_replay_never_writes_through_a_symlink(served: Served, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("not yours\n")
    out = tmp_path / "window.fst"
    out.symlink_to(victim)
    done = replay(str(served.recording), "--waves", "0:400", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert victim.read_text() == "not yours\n"
    assert not out.is_symlink() and mode(out) == 0o600


def test_a_replay_refuses_a_folder_anyone_may_write_to(served: Served, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone could swap the file
    done = replay(str(served.recording), "--waves", "0:400", "--out", str(shared / "w.fst"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "writable by every user" in done.stderr and "Traceback" not in done.stderr
    assert list(shared.iterdir()) == []


# ------------------------------------------------------------------------ named folders
def test_ones_own_open_record_and_waves_folders_are_tightened(tmp_path: Path) -> None:
    record, waves = tmp_path / "recs", tmp_path / "waves"
    record.mkdir()
    waves.mkdir()
    record.chmod(0o777)
    waves.chmod(0o770)
    args = ("--record", str(record), "--waves", str(waves))
    with ServerProcess.start(devices=1, extra_args=args) as srv:
        pass
    assert mode(record) == 0o700 and mode(waves) == 0o700
    assert f"--record {record} is writable by other users (mode 777): tightened to 0700" in srv.log
    assert f"--waves {waves} is writable by other users (mode 770): tightened to 0700" in srv.log


def _refused(folder: Path, flag: str) -> str:
    """Start a server with `flag folder`; it must refuse (exit 2); its log."""
    try:
        srv = ServerProcess.start(devices=1, extra_args=(flag, str(folder)))
    except RuntimeError as exc:
        assert "exit 2" in str(exc), exc
        return str(exc)
    srv.stop()
    pytest.fail(f"the server started with {flag} {folder} (mode {mode(folder):o})")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the folder to another user")
@pytest.mark.parametrize("flag", ["--record", "--waves"])
def test_another_users_open_folder_is_refused(tmp_path: Path, flag: str) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir()
    os.chown(folder, 65534, 65534)
    folder.chmod(0o777)
    log = _refused(folder, flag)
    assert f"{flag} {folder} is writable by other users (mode 777)" in log
    assert "belongs to uid 65534" in log
    assert mode(folder) == 0o777 and list(folder.iterdir()) == []


def test_a_shared_sticky_folder_is_refused_not_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)  # as /tmp: others' files live there
    log = _refused(folder, "--record")
    assert "a shared folder" in log
    assert mode(folder) == 0o1777 and list(folder.iterdir()) == []
