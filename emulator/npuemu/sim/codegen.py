"""How a model's C++ is generated and compiled: the options that change its speed and its
build time, not its behaviour; the CPU a model is built for; how long builds take.

`CodeGen` is one set of such options (`BASELINE`: the flags before issue 42; `DEFAULT`:
what models are built with); bench/bench_rtl_speed.py builds a model per set and compares
their simulated cycles per second in one run (docs/performance.md, "RTL speed").
A set compiled for this machine's CPU (``-march=native``) puts the CPU's identity into the
model's cache key (`cpu_identity`), so a cache copied to another CPU is rebuilt, never run
there. `BuildTimes` keeps each model's last build time next to the cache, for the progress
line's ETA.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = [
    "BASELINE",
    "DEFAULT",
    "EXPECTED_BUILD_S",
    "NATIVE",
    "BuildTimes",
    "CodeGen",
    "ccache",
    "cpu_identity",
    "profile_digest",
    "profile_folder",
    "with_profile",
]

NATIVE = "-march=native"


@dataclass(frozen=True)
class CodeGen:
    """Verilator and C++ compiler options of a model build (all part of its cache key).

    `pgo` is gcc's profile-guided optimisation: ``"generate"`` builds a model that writes a
    profile into `profile_dir` when it exits; ``"use"`` compiles with that profile.
    """

    name: str
    verilator_args: tuple[str, ...] = ()
    opt_fast: str = "-O3"  # the code run every cycle
    opt_slow: str = "-O0"  # constructors, initial blocks: run once
    opt_global: str = "-Os"  # Verilator's runtime library (verilated.mk's default)
    pgo: str = ""
    profile_dir: str = ""
    profile_digest: str = ""  # of the profile `use` reads: part of the key
    use_profile: bool = True  # compile with a profile npuemu.sim.pgo took, if one fits

    @property
    def native(self) -> bool:
        """Compiled for the building CPU only."""
        return any(NATIVE in arg for arg in self.verilator_args)

    def make_flags(self) -> str:
        """verilated.mk's optimisation variables, for MAKEFLAGS (overrides its own)."""
        return f"OPT_FAST={self.opt_fast} OPT_SLOW={self.opt_slow} OPT_GLOBAL={self.opt_global}"

    def build_args(self, build_dir: Path) -> list[str]:
        """Verilator arguments, the profile's included. gcc names a profile file after the
        object's absolute path; -fprofile-prefix-path strips the build folder from it, so
        the `use` build (another folder) finds the `generate` build's files."""
        args = list(self.verilator_args)
        if self.pgo not in ("", "generate", "use"):
            raise ValueError(f"CodeGen.pgo is {self.pgo!r}: expected '', 'generate' or 'use'")
        if self.pgo:
            prefix = f"-fprofile-prefix-path={build_dir}"
            if self.pgo == "generate":
                flag = f"-fprofile-generate={self.profile_dir}"
                args += ["-CFLAGS", flag, "-CFLAGS", prefix, "-LDFLAGS", flag]
            else:  # code the profile run never reached stays optimised as without it
                flags = (
                    f"-fprofile-use={self.profile_dir}",
                    prefix,
                    "-fprofile-partial-training",
                    "-Wno-missing-profile",
                )
                for flag in flags:
                    args += ["-CFLAGS", flag]
        return args

    def key(self) -> str:
        """What goes into the model's cache key (the profile by its digest, not its path)."""
        key = repr((self.verilator_args, self.make_flags(), self.pgo, self.profile_digest or None))
        if self.native:
            key += cpu_identity()
        return key


BASELINE = CodeGen("baseline")
"""The build options before issue 42 (for the benchmark's comparison)."""

DEFAULT = (
    CodeGen("default", verilator_args=("-CFLAGS", NATIVE))
    if os.environ.get("NPU_EMU_NATIVE", "").strip() not in ("", "0")
    else CodeGen("portable")
)
"""What models are built with: portable code (the flags before issue 42), because
-march=native measured 1.6 % (Buyi) and 3.0 % (ZG330) slower than it in one run of
bench/bench_rtl_speed.py on a quiet machine (docs/performance.md, "RTL speed");
``NPU_EMU_NATIVE=1`` builds code for this CPU, keyed by its identity. The large gain is
the opt-in gcc profile (`npuemu.sim.pgo`)."""

# A model's first build when no build of it was timed here yet (2-core machine, idle,
# docs/performance.md): untraced, traced (--waves, --record), block models.
EXPECTED_BUILD_S = {"plain": 110.0, "traced": 400.0}

_CPU_FIELDS = (
    "vendor_id",
    "model name",
    "flags",
    "cpu family",
    "model",  # x86
    "CPU implementer",
    "CPU architecture",
    "CPU variant",
    "CPU part",
    "Features",  # arm
)


@functools.cache
def cpu_identity() -> str:
    """The CPU that ``-march=native`` compiles for: its model and feature flags from
    /proc/cpuinfo (the first processor), or, without that file, gcc's resolution of
    ``-march=native``. Two CPUs that differ in a flag get different model caches."""
    with contextlib.suppress(OSError):
        first = Path("/proc/cpuinfo").read_text(errors="replace").split("\n\n")[0]
        picked = []
        for line in first.splitlines():
            name, _, value = line.partition(":")
            if name.strip() in _CPU_FIELDS:
                picked.append(f"{name.strip()}={' '.join(value.split())}")
        if picked:
            return "; ".join(sorted(picked))
    cxx = os.environ.get("CXX", "c++")
    try:
        out = subprocess.run(
            [cxx, NATIVE, "-Q", "--help=target"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown CPU ({exc})"  # still a key: it never matches a known CPU's
    return " ".join(out.split())


def profile_folder(root: Path, label: str) -> Path:
    """Where npuemu.sim.pgo keeps the profile of the model `label` (``buyi``)."""
    return root / "profiles" / label


def profile_digest(folder: Path) -> str | None:
    """Digest of the profile files (.gcda) in `folder`; None when there are none."""
    files = sorted(folder.rglob("*.gcda"))
    if not files:
        return None
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def with_profile(codegen: CodeGen, root: Path, label: str, digest: str) -> CodeGen:
    """`codegen` compiled with the profile npuemu.sim.pgo took for this very model (its
    digest and options), when there is one; else `codegen` unchanged. The profile's files
    are hashed into the key: a profile taken again builds another model."""
    folder = profile_folder(root, label)
    try:
        fits = json.loads((folder / "profile.json").read_text())
    except (OSError, ValueError):
        return codegen
    if (
        codegen.pgo
        or not codegen.use_profile
        or not isinstance(fits, dict)
        or fits.get("model") != digest
        or fits.get("codegen") != codegen.key()
    ):
        return codegen  # none asked for, or stale: the RTL or the options changed
    files = profile_digest(folder)
    if files is None or files != fits.get("gcda"):
        return codegen  # files gone or changed since the profile run
    return replace(codegen, pgo="use", profile_dir=str(folder), profile_digest=files)


def ccache() -> str | None:
    """ccache's path when it is on PATH: verilated.mk runs every compile through OBJCACHE.
    A model rebuilt with a new cache key (build.py changed, another worktree) but the same
    generated C++ then compiles in seconds."""
    return shutil.which("ccache")


class BuildTimes:
    """The last build time of each model kind (``buyi``, ``buyi-waves``...), in a JSON file
    next to the model cache: the progress line's ETA and the traced build's announcement."""

    def __init__(self, root: Path) -> None:
        self.path = root / "build-times.json"

    def _read(self) -> dict[str, float]:
        try:
            raw = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}  # none yet, or a damaged file: expectations fall back to defaults
        if not isinstance(raw, dict):
            return {}
        return {
            k: float(v)
            for k, v in raw.items()
            if isinstance(k, str) and isinstance(v, (int, float)) and 0 < v < 1e6
        }

    def last(self, kind: str) -> float | None:
        """Seconds of the last build of `kind` here, or None."""
        return self._read().get(kind)

    def expected(self, kind: str, traced: bool) -> tuple[float, str]:
        """(seconds, where the figure comes from) for the next build of `kind`."""
        last = self.last(kind)
        if last is not None:
            return last, "its last build here"
        return EXPECTED_BUILD_S["traced" if traced else "plain"], "a typical first build"

    def record(self, kind: str, seconds: float) -> None:
        """Store `seconds` for `kind`: under a lock (two builds of other kinds may end at
        once), written whole and renamed (readers never see half a file)."""
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with (
            contextlib.suppress(OSError),  # a read-only cache still builds and runs
            self.path.with_name(f"{self.path.name}.lock").open("w") as lock,
        ):
            fcntl.flock(lock, fcntl.LOCK_EX)
            times = self._read()
            times[kind] = round(seconds, 1)
            tmp.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
            tmp.replace(self.path)
