"""Memory files and worker logs: a start-up check of free space that refuses a folder too
small for the configured memories (naming the size needed), the fallback from a small
/dev/shm, and worker logs printed at start and kept after a crash."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import run_cli

from npuemu.server import storage
from npuemu.server.launch import ServerProcess
from xrt.hw.targets import target


@pytest.fixture
def small_fs(tmp_path) -> Iterator[Path]:
    """A 1 MiB tmpfs (needs the right to mount: root here and in CI)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_too_small_memory_dir_refuses_to_start(small_fs):
    out = run_cli(["serve", "--port", "0", "--devices", "2", "--memory-dir", str(small_fs)])
    assert out.returncode == 2, out
    # Two Buyi devices: 2 x (64 MiB udma + 512 MiB plddr).
    assert "--memory-dir" in out.stderr and "need 1,152 MiB" in out.stderr, out.stderr
    assert str(small_fs) in out.stderr and "Traceback" not in out.stderr


def test_small_dev_shm_falls_back_to_the_temp_folder(small_fs, monkeypatch):
    monkeypatch.setattr(storage, "DEFAULT_MEMORY_DIR", small_fs)
    folder, warning = storage.choose_memory_dir(None, target("buyi"), 1)
    assert folder == Path(tempfile.gettempdir())
    assert warning and "576 MiB" in warning and "--shm-size" in warning


def test_needed_size_counts_every_device():
    cfg = target("zg330")
    assert storage.memory_bytes_needed(cfg, 3) == 3 * (64 + 512) * (1 << 20)


@pytest.mark.sim
def test_worker_log_is_printed_and_kept_after_a_crash():
    srv = ServerProcess.start(devices=1)
    try:
        folder = Path(re.search(r"worker logs in (\S+)", srv.log).group(1))
        pid = int(re.search(r"worker npu0 ready \(pid (\d+)\)", srv.log).group(1))
        assert (folder / "npu0" / "worker.log").is_file()
        os.kill(pid, signal.SIGKILL)  # a crash
        # The server notices the dead worker and restarts it; the client rides out the
        # restart (it retries refusals marked retryable for a bounded time), so the next
        # call answers from the new worker.
        read = run_cli(["regs", "read", "npu0", "npu.MAGIC", "--server", srv.address])
        assert read.returncode == 0 and "0x4e505530" in read.stdout, read
        t0 = time.monotonic()
        while "simulation worker restarted" not in srv.log:
            assert time.monotonic() - t0 < 120.0, srv.log
            time.sleep(0.2)
    finally:
        srv.stop()
    assert srv.proc.returncode == 0
    assert (folder / "npu0" / "worker.log").is_file(), "the log of the crashed worker is gone"
    assert f"worker logs kept in {folder}" in srv.log
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.sim
def test_default_log_folder_is_removed_after_a_clean_run():
    with ServerProcess.start(devices=1) as srv:
        folder = Path(re.search(r"worker logs in (\S+)", srv.log).group(1))
        assert folder.is_dir()
    assert not folder.exists()


@pytest.mark.sim
@pytest.mark.parametrize("planted", ["another user's folder", "a folder open to all", "a symlink"])
def test_a_log_root_someone_else_planted_is_not_used(tmp_path, planted):
    """Defect: the default log root was a fixed name ($TMPDIR/npu-emu-logs) made with
    exist_ok: another user who made it first stopped every server at start (an uncaught
    PermissionError), or, with it open to all, could swap a server's log folder for a
    symlink. Now the root is per user, and one that is not this user's closed folder is
    passed over for a fresh private folder, with a warning."""
    root = tmp_path / f"npu-emu-logs-{os.getuid()}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if planted == "a symlink":
        root.symlink_to(elsewhere)
    else:
        root.mkdir(mode=0o777)
        root.chmod(0o777)
        if planted == "another user's folder":
            os.chown(root, 65534, 65534)
    with ServerProcess.start(devices=1, env={"TMPDIR": str(tmp_path)}) as srv:
        folder = Path(re.search(r"worker logs in (\S+)", srv.log).group(1))
        assert (folder / "npu0" / "worker.log").is_file()
        assert root not in folder.parents and elsewhere not in folder.resolve().parents
        assert folder.stat().st_mode & 0o077 == 0
        assert "worker logs go to" in srv.log
    assert not any(elsewhere.iterdir()) and (planted == "a symlink" or not any(root.iterdir()))


def test_the_default_log_root_is_private_to_the_user(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root, why = storage.private_log_root()
    assert root == tmp_path / f"npu-emu-logs-{os.getuid()}" and not why
    assert root.stat().st_mode & 0o777 == 0o700
    assert storage.private_log_root() == (root, "")  # the second server reuses it
