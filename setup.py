"""Build hook: ship the RTL the emulator builds its model from inside the wheel.

`rtl/` stays the one source in the repository; at build time its files are copied to
``npuemu/_rtl/`` in the build folder, so an installed `npu-emu` (a wheel, not a checkout)
can verilate and serve. Editable installs skip the copy: they read `rtl/` in place.
Everything else about the package lives in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RTL = Path(__file__).resolve().parent / "rtl"


class BuildPyWithRtl(build_py):
    """build_py that also copies rtl/ into the package as npuemu/_rtl."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "npuemu" / "_rtl"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(RTL, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithRtl})
