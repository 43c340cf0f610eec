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

Folders a user names for files that hold a holder's data (``--record``, ``--waves``) are made
private (`private_folder`): created 0700, and a folder there already that other users may
write to is refused, unless it is the user's own (then tightened to 0700, with a warning). A
file the replay writes where the user says (``--out``) is created 0600 and never written
through a symlink (`place_private_file`).
"""

from __future__ import annotations

import contextlib
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
    "PortFile",
    "StartupError",
    "choose_memory_dir",
    "free_bytes",
    "memory_bytes_needed",
    "mib",
    "place_private_file",
    "private_folder",
    "private_log_root",
    "write_port_file",
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


def _make_folders(path: Path) -> None:
    """Create `path` and any missing parents, each 0700."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


def private_folder(path: Path, flag: str) -> str:
    """Make `path`, a folder the user named with `flag`, one only they can open: created
    0700 (missing parents too); one that exists must be a folder, and if other users may
    write to it, it must belong to this user and is then tightened to 0700 (a shared folder
    with the sticky bit, such as /tmp, is refused: others' files live there). A symlink the
    user named is followed: the folder it leads to is checked. Returns a warning ("" if
    none).

    Raises:
        StartupError: not a folder, another user's or a shared one open to others.
    """
    try:
        _make_folders(path)
        st = os.stat(path)
    except OSError as exc:
        raise StartupError(f"{flag} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StartupError(f"{flag} {path} is not a folder")
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o022:
        return ""
    why = f"{flag} {path} is writable by other users (mode {mode:o})"
    if mode & stat.S_ISVTX:
        raise StartupError(f"{why}: a shared folder; give a folder of its own (made 0700)")
    if st.st_uid != os.getuid():
        raise StartupError(
            f"{why} and belongs to uid {st.st_uid}: give a folder of your own (made 0700)"
        )
    os.chmod(path, 0o700)
    return f"{why}: tightened to 0700"


def place_private_file(src: Path, out: Path) -> None:
    """Copy `src` to `out`, mode 0600: missing folders are made 0700; the copy is written
    beside `out` under a fresh name (``O_EXCL``: never through a symlink) and renamed over
    it, so a symlink at `out` is replaced, not followed. A folder writable by every user
    without the sticky bit is refused (anyone could swap the file).

    Raises:
        OSError: it cannot be written there (the message says why).
    """
    folder = out.absolute().parent
    _make_folders(folder)
    st = os.stat(folder)
    if st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX:
        raise PermissionError(f"{folder} is writable by every user: write {out.name} elsewhere")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{out.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as dst, src.open("rb") as data:
            shutil.copyfileobj(data, dst)
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass
class PortFile:
    """The file of ``serve --port-file``: what was written, to remove it at shutdown."""

    path: Path
    stat: os.stat_result

    def remove(self) -> None:
        """Remove the file, unless something else replaced it since (another server)."""
        with contextlib.suppress(OSError):
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == (self.stat.st_dev, self.stat.st_ino):
                os.unlink(self.path)


def write_port_file(path: Path, url: str) -> PortFile:
    """Write `url` and a newline into `path`, mode 0600, atomically: written beside it
    under a fresh name (``mkstemp``: 0600, ``O_EXCL``) and renamed over it, so a reader sees
    no file or the whole of it, and a symlink at `path` is replaced, not followed.

    Raises:
        OSError: it cannot be written there.
    """
    folder = path.absolute().parent
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(url + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return PortFile(path, os.stat(path))
