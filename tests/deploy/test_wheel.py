"""A built wheel, installed into a fresh virtual environment, serves: the RTL, the
configuration and the generated files travel as package data (npuemu/_rtl)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import grpc
import pytest

from npuemu.server.launch import ServerProcess
from npuemu.sim.build import BUILD_ROOT
from xrt.hw.wire import pb, pb_grpc

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parents[2]


def build_wheel(out: Path) -> Path:
    """`pip wheel` of the checkout, offline (no build isolation: setuptools is here)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = out.glob("npu_emu-*.whl")
    return wheel


def test_wheel_ships_the_rtl_and_serves(tmp_path):
    wheel = build_wheel(tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    rtl_files = (ROOT / "rtl" / "files.f").read_text().split()
    for rel in [ln for ln in rtl_files if ln.endswith(".sv")] + ["files.f", "config/npu.toml"]:
        assert f"npuemu/_rtl/{rel}" in names, rel
    assert "npuemu/_rtl/mem/npu_mem_dpi.cpp" in names
    assert "xrt/hw/_proto/npuemu/v1/device_pb2.py" in names
    for face in ("xir", "host_backend", "buyi_backend", "zg330_backend"):  # the manual's modules
        assert f"{face}/__init__.py" in names, face
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    assert any(ln.startswith("Requires-Dist: onnx==") and "extra" not in ln for ln in requires)

    # A fresh environment with the wheel and nothing of the checkout. Its dependencies are
    # this environment's (a .pth adds its site-packages after the venv's own, without the
    # editable install's finder, which only runs from a site folder's own .pth files).
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "zz_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    where = subprocess.run(
        [str(py), "-c", "import npuemu.sim.build as b; print(b.__file__); print(b.RTL_DIR)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.split()
    assert where[0].startswith(str(env_dir)), where
    assert where[1].startswith(str(env_dir)) and where[1].endswith("npuemu/_rtl"), where

    # Serve one request from the installed command. The model cache is shared with the
    # checkout's: its key hashes the RTL's contents, so the packaged copy (identical
    # sources) finds the model this session already built instead of a second 60-90 s build.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"NPU_EMU_BUILD_DIR": str(BUILD_ROOT), "PYTHONUNBUFFERED": "1"})
    with ServerProcess.start(
        command=(str(env_dir / "bin" / "npu-emu"),),
        env=env,
        cwd=tmp_path,
        extra_args=("--log-dir", str(tmp_path / "logs")),
    ) as srv:
        with grpc.insecure_channel(srv.address) as ch:
            stub = pb_grpc.DeviceServiceStub(ch)
            lease = stub.OpenDevice(
                pb.OpenDeviceRequest(client="wheel-test", protocol_version=1), timeout=60
            ).lease_id
            magic = stub.ReadRegister(
                pb.ReadRegisterRequest(lease_id=lease, address=0x4000_0000), timeout=60
            ).value
            stub.CloseDevice(pb.CloseDeviceRequest(lease_id=lease), timeout=60)
        assert magic == 0x4E50_5530
        log = srv.log
    assert "from the cache" in log, log

    # The wheel's entry point gives the installed runtime its default device, sim://buyi.
    env.pop("XRT_DEVICE", None)
    code = "from xrt import Device\nwith Device() as d: print(type(d).__name__, d.url)"
    out = subprocess.run(
        [str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert out.returncode == 0 and out.stdout.split() == ["BuyiDevice", "sim://buyi"], out
