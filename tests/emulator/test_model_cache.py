"""The model cache and its build options (issue 42): a model compiled for this CPU
(-march=native) is found again here, never on another CPU; checkpoints and recordings name
the model by what it is, not by how it was compiled; each kind's last build time is kept
next to the cache for the progress line's ETA. No model is built here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from npuemu.sim import codegen
from npuemu.sim.build import NPU_SIM_MAIN, build_model, model_digest, model_dir, verilator_env
from npuemu.sim.codegen import BASELINE, DEFAULT, BuildTimes, CodeGen, cpu_identity


def test_this_cpu_is_identified_by_its_model_and_flags() -> None:
    if not Path("/proc/cpuinfo").is_file():
        pytest.skip("no /proc/cpuinfo: the identity is gcc's -march=native resolution")
    ident = cpu_identity()
    first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    if "flags" in first:  # x86: the model name and every feature flag
        flags = next(ln for ln in first.splitlines() if ln.startswith("flags"))
        assert " ".join(flags.split(":", 1)[1].split()) in ident
        assert "model name=" in ident


NATIVE = CodeGen("default", verilator_args=("-CFLAGS", "-march=native"))


def test_default_models_are_portable_and_native_is_asked_for() -> None:
    # -march=native measured slower here (docs/performance.md): portable by default.
    assert "-march=native" not in DEFAULT.build_args(Path("/tmp/x")) and not DEFAULT.native
    assert DEFAULT.key() == BASELINE.key()
    code = "from npuemu.sim.codegen import DEFAULT; print(DEFAULT.native)"
    env = {**os.environ, "NPU_EMU_NATIVE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["True"], out.stderr


def _reuse(root: Path, monkeypatch: pytest.MonkeyPatch, cpu: str) -> tuple[Path, str] | None:
    """The folder and digest build_model reuses on a CPU named `cpu`, or None when it
    would build (its folder has no finished model)."""
    monkeypatch.setattr(codegen, "cpu_identity", lambda: cpu)
    digest = model_digest("npu_sim", {"Target": 1}, False, ("--assert",), NPU_SIM_MAIN)
    folder = model_dir(root, "buyi", digest, NATIVE)
    if not (folder / ".built").is_file():
        return None
    model = build_model(
        "npu_sim",
        {"Target": 1},
        waves=False,
        name="buyi",
        main=NPU_SIM_MAIN,
        build_root=root,
        codegen=NATIVE,
    )
    assert not model.built_now
    return model.build_dir, model.digest


def test_a_cache_copied_to_another_cpu_is_rebuilt_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model "built" on CPU A: build_model's own folder for it, with its finished marker.
    monkeypatch.setattr(codegen, "cpu_identity", lambda: "model name=A; flags=sse2 avx2")
    digest = model_digest("npu_sim", {"Target": 1}, False, ("--assert",), NPU_SIM_MAIN)
    on_a = model_dir(tmp_path, "buyi", digest, NATIVE)
    on_a.mkdir(parents=True)
    (on_a / ".built").write_text("built on A\n")

    reused = _reuse(tmp_path, monkeypatch, "model name=A; flags=sse2 avx2")
    assert reused is not None and reused[0] == on_a
    # The same cache on a CPU without avx2 (or another model): another folder, not built.
    assert _reuse(tmp_path, monkeypatch, "model name=A; flags=sse2") is None
    assert _reuse(tmp_path, monkeypatch, "model name=B; flags=sse2 avx2") is None
    # Portable code (the baseline options) does not depend on the CPU.
    monkeypatch.setattr(codegen, "cpu_identity", lambda: "A")
    a = model_dir(tmp_path, "buyi", digest, BASELINE)
    monkeypatch.setattr(codegen, "cpu_identity", lambda: "B")
    assert model_dir(tmp_path, "buyi", digest, BASELINE) == a


def test_checkpoints_name_the_model_not_how_it_was_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkpoint or recording carries BuiltModel.digest: a model rebuilt with other
    # options (or on another CPU) still accepts them, from another folder.
    digest = model_digest("npu_sim", {"Target": 1}, False, ("--assert",), NPU_SIM_MAIN)
    folders = {model_dir(tmp_path, "buyi", digest, cg) for cg in (BASELINE, NATIVE)}
    assert len(folders) == 2
    for folder in folders:
        folder.mkdir(parents=True)
        (folder / ".built").write_text("x\n")
    for cg in (BASELINE, NATIVE):
        model = build_model(
            "npu_sim",
            {"Target": 1},
            waves=False,
            name="buyi",
            main=NPU_SIM_MAIN,
            build_root=tmp_path,
            codegen=cg,
        )
        assert model.digest == digest and model.build_dir in folders
    other = model_digest("npu_sim", {"Target": 2}, False, ("--assert",), NPU_SIM_MAIN)
    assert other != digest


def test_profile_builds_carry_the_profile_in_their_key(tmp_path: Path) -> None:
    gen = codegen.CodeGen("x", pgo="generate", profile_dir=str(tmp_path))
    use = codegen.CodeGen("x", pgo="use", profile_dir=str(tmp_path), profile_digest="1")
    use2 = codegen.CodeGen("x", pgo="use", profile_dir=str(tmp_path), profile_digest="2")
    assert len({gen.key(), use.key(), use2.key()}) == 3
    assert f"-fprofile-prefix-path={tmp_path / 'b'}" in use.build_args(tmp_path / "b")
    with pytest.raises(ValueError, match="'sometimes'"):
        codegen.CodeGen("x", pgo="sometimes").build_args(tmp_path)


def test_build_times_are_kept_per_kind_and_survive_a_damaged_file(tmp_path: Path) -> None:
    times = BuildTimes(tmp_path)
    assert times.expected("buyi", traced=False) == (110.0, "a typical first build")
    assert times.expected("buyi-waves", traced=True)[0] == 400.0
    times.record("buyi", 93.44)
    times.record("buyi-waves", 380.0)
    assert BuildTimes(tmp_path).expected("buyi", traced=False) == (93.4, "its last build here")
    assert BuildTimes(tmp_path).last("buyi-waves") == 380.0
    # A hostile or damaged file: ignored, never trusted for odd values.
    times.path.write_text('{"buyi": -5, "zg330": "x", "buyi-waves": 1e300}')
    assert times.last("buyi") is None and times.last("buyi-waves") is None
    times.path.write_text("[not json")
    assert times.expected("buyi", traced=False)[0] == 110.0
    times.record("buyi", 50.0)  # rewrites the damaged file whole
    assert times.last("buyi") == 50.0


def test_ccache_compiles_every_object_when_installed() -> None:
    found = shutil.which("ccache")
    if found is None:
        pytest.skip("ccache is not installed (Debian: apt-get install ccache)")
    assert f"OBJCACHE={found}" in verilator_env()["MAKEFLAGS"].split()


def test_a_profile_is_used_only_by_the_model_it_was_taken_for(tmp_path: Path) -> None:
    # What npuemu.sim.pgo leaves: the profile files and the model they fit.
    folder = codegen.profile_folder(tmp_path, "buyi")
    folder.mkdir(parents=True)
    (folder / "Vtop___024root__0.gcda").write_bytes(b"counts")
    fits = {"model": "d1", "codegen": DEFAULT.key(), "gcda": codegen.profile_digest(folder)}
    (folder / "profile.json").write_text(json.dumps(fits))

    used = codegen.with_profile(DEFAULT, tmp_path, "buyi", "d1")
    assert used.pgo == "use" and used.profile_dir == str(folder)
    assert f"-fprofile-use={folder}" in used.build_args(tmp_path / "m")
    assert model_dir(tmp_path, "buyi", "d1", used) != model_dir(tmp_path, "buyi", "d1", DEFAULT)
    # Another RTL (digest), other options, another model, or opted out: without it.
    assert codegen.with_profile(DEFAULT, tmp_path, "buyi", "d2") == DEFAULT
    assert codegen.with_profile(NATIVE, tmp_path, "buyi", "d1") == NATIVE
    assert codegen.with_profile(DEFAULT, tmp_path, "zg330", "d1") == DEFAULT
    own = replace(DEFAULT, use_profile=False)
    assert codegen.with_profile(own, tmp_path, "buyi", "d1") == own
    # Files changed since the run (or a damaged marker): not trusted.
    (folder / "Vtop___024root__0.gcda").write_bytes(b"other counts")
    assert codegen.with_profile(DEFAULT, tmp_path, "buyi", "d1") == DEFAULT
    (folder / "profile.json").write_text("[1, 2")
    assert codegen.with_profile(DEFAULT, tmp_path, "buyi", "d1") == DEFAULT
