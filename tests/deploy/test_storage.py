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
