"""A C driver, unmodified, against the simulator: the DMA example of examples/c built on
include/npu/npu_mmio.h (`make c-example`) runs under ``npu-emu attach`` on both targets
(registers through the lease's register ring, udma mapped), copies through the DMA
bit-exact, and a C program that crashes mid-DMA leaves the device clean for the next lease."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.hw.regs import DMA

pytestmark = [
    pytest.mark.sim,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler"),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("c")
    build = subprocess.run(
        [
            "make",
            "-C",
            str(ROOT),
            "c-example",
            f"C_OUT={out}",
            "C_FLAGS=-O2 -Wall -Wextra -Werror -std=gnu11",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert (out / "npu_dma_example").is_file()  # the board's build: /dev/mem (not run here)
    return out


@pytest.fixture(scope="module", params=["buyi", "zg330"])
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    with ServerProcess.start(target=request.param, devices=1) as srv:
        yield srv


def _attach(server: ServerProcess, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "npuemu", "attach", server.url, "--", *command],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_c_example_copies_through_the_dma_under_attach(
    programs: Path, server: ServerProcess
) -> None:
    run = _attach(server, str(programs / "npu_dma_example_emu"), "65536")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "65536 bytes to plddr and back: ok" in run.stdout


def test_a_c_program_that_crashes_mid_dma_leaves_the_device_clean(
    programs: Path, server: ServerProcess
) -> None:
    run = _attach(server, str(programs / "npu_dma_example_emu"), "--crash-mid-dma", "1048576")
    assert run.returncode == 128 + 6, run.stdout + run.stderr  # SIGABRT, as a shell says
    assert "crashing with the DMA running" in run.stderr
    with Device.open(server.url) as dev:  # the next lease: cleared memories, an idle DMA
        dma = dev.get_reg_region("dma")
        assert DMA.register("STATUS").field("BUSY").extract(dma.regs.STATUS.read()) == 0
        udma = dev.get_mem_region("udma")
        head = bytearray(4096)
        udma.read(head, udma.base)
        assert head == bytes(4096)
        plddr = dev.default_mem_region()
        chunk = plddr.malloc(4096)
        assert chunk.tobytes() == bytes(4096)


def test_attach_outside_the_servers_machine_or_without_a_program_says_why(
    server: ServerProcess,
) -> None:
    run = _attach(server)
    assert run.returncode == 2 and "give the program to run" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "npuemu", "attach", server.url + "?local=0", "--", "true"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1 and "register ring" in run.stderr, run.stderr
