"""Where a server keeps its device memory files and its worker logs, checked at start-up.

Memory files are sparse, but a client may fill them: a worker whose file system runs out
of room while the simulated DMA writes dies of SIGBUS. So the server checks at start that
the memory folder has room for every byte of every device's memories, and refuses to
start (naming the size needed) when it has not. The default folder is /dev/shm (RAM); when
it is too small (a container's 64 MiB) the server falls back to the temporary folder with a
warning. Worker logs go to their own folder, printed at start and kept after a crash: by
default in a root private to the user (``$TMPDIR/npu-emu-logs-<uid>``, mode 0700, checked
to be a real folder owned by this user; if another user made it first, or made it open to
others, the server uses a fresh private folder instead and says so).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from xrt.hw.config import TargetConfig

__all__ = [
    "DEFAULT_MEMORY_DIR",
    "LogFolder",
    "StartupError",
    "choose_memory_dir",
    "free_bytes",
    "memory_bytes_needed",
    "mib",
    "private_log_root",
]

log = logging.getLogger("npuemu.server")

DEFAULT_MEMORY_DIR = Path("/dev/shm")
# Files live in the device memories, so only the external ones (the OCM is inside the RTL).
FILE_BACKED_MEMORIES = ("udma", "plddr")


class StartupError(Exception):
    """The server cannot start as configured; the message says why and what to change."""


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def memory_bytes_needed(target: TargetConfig, devices: int) -> int:
    """Bytes the memory files of `devices` devices take when full."""
    return devices * sum(target.memory(name).size for name in FILE_BACKED_MEMORIES)


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged process may still write in `folder`'s file system."""
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def _check(folder: Path, needed: int, devices: int) -> str | None:
    """None when `folder` can hold `needed` bytes, else why not."""
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    free = free_bytes(folder)
    if free < needed:
        return (
            f"{folder} has {mib(free)} free but {devices} device(s) need {mib(needed)} "
            f"for their memory files"
        )
    return None


def choose_memory_dir(
    requested: Path | None, target: TargetConfig, devices: int
) -> tuple[Path, str | None]:
    """The folder for the memory files, and a warning when the default had to be replaced.

    Args:
        requested: ``--memory-dir``; None for the default (/dev/shm, else the temp folder).

    Raises:
        StartupError: the requested folder (or, by default, both candidates) is too small.
    """
    needed = memory_bytes_needed(target, devices)
    if requested is not None:
        why = _check(requested, needed, devices)
        if why:
            raise StartupError(
                f"--memory-dir: {why}; give a folder with at least {mib(needed)} free "
                "(or fewer --devices)"
            )
        return requested, None
    fallback = Path(tempfile.gettempdir())
    why_default = _check(DEFAULT_MEMORY_DIR, needed, devices)
    if why_default is None:
        return DEFAULT_MEMORY_DIR, None
    why_fallback = _check(fallback, needed, devices)
    if why_fallback is None:
        return fallback, (
            f"{why_default}; memory files go to {fallback} instead (slower than RAM: give "
            "the container a larger /dev/shm, e.g. docker run --shm-size, or --memory-dir)"
        )
    raise StartupError(
        f"no room for the memory files: {why_default}, and {why_fallback}; need "
        f"{mib(needed)}: pass --memory-dir with a folder that has it"
    )


def private_log_root() -> tuple[Path | None, str]:
    """``$TMPDIR/npu-emu-logs-<uid>``, made 0700 if missing; (None, why) when what is
    there is not a folder of this user closed to others (never followed if a symlink)."""
    root = Path(tempfile.gettempdir()) / f"npu-emu-logs-{os.getuid()}"
    try:
        root.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return None, f"cannot make {root}: {exc.strerror}"
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode):
        return None, f"{root} is not a folder"
    if st.st_uid != os.getuid():
        return None, f"{root} belongs to uid {st.st_uid}, not to this user"
    if st.st_mode & 0o077:
        return None, f"{root} is open to other users (mode {stat.S_IMODE(st.st_mode):o})"
    return root, ""


@dataclass
class LogFolder:
    """The folder of a server's worker logs (one subfolder per device).

    A folder the user chose is always kept. The default one (under the temp folder) is
    removed at a clean shutdown unless a worker crashed, so the log that explains the
    crash stays where the start-up line said it would be.
    """

    path: Path
    chosen: bool

    @classmethod
    def create(cls, requested: Path | None) -> LogFolder:
        if requested is not None:
            requested.mkdir(parents=True, exist_ok=True)
            return cls(requested.resolve(), True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        prefix = f"{stamp}-{os.getpid()}-"
        root, why_not = private_log_root()
        if root is None:  # someone else's folder: a fresh private one beside it instead
            folder = Path(tempfile.mkdtemp(prefix=f"npu-emu-logs-{prefix}"))
            log.warning("%s: worker logs go to %s instead", why_not, folder)
            return cls(folder, False)
        return cls(Path(tempfile.mkdtemp(prefix=prefix, dir=root)), False)

    def finish(self, crashed: bool) -> bool:
        """At shutdown: remove the default folder unless a worker crashed; True if kept."""
        if self.chosen or crashed:
            return True
        shutil.rmtree(self.path, ignore_errors=True)
        return False
