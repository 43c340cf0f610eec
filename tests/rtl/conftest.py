"""Fixtures for the RTL tests: verilated models built once per session, shared-memory files."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from npuemu.sim.build import BuiltModel, build_npu_sim

TARGETS = ("buyi", "zg330")


@pytest.fixture(scope="session")
def sim_model() -> Iterator[callable]:
    """`sim_model("buyi")` -> the `npu_sim` model of that target (built once, cached)."""
    cache: dict[str, BuiltModel] = {}

    def get(name: str) -> BuiltModel:
        if name not in cache:
            cache[name] = build_npu_sim(name)
        return cache[name]

    yield get


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    """A private folder in /dev/shm (RAM) for memory files, removed afterwards."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    path = Path(tempfile.mkdtemp(prefix="npuemu-test-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
