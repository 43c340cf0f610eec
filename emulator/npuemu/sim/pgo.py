"""gcc profile-guided optimisation of the harness model, taken once on request.

``python -m npuemu.sim.pgo buyi zg330`` builds each target's model with -fprofile-generate,
runs the profile workload in it (npuemu.sim.pgo_workload: about 150,000 cycles of
convolutions and register traffic) and keeps the profile next to the cache
(``$NPU_EMU_BUILD_DIR/profiles/<model>/``, with profile.json naming the model it fits).
From then on `build_npu_sim` compiles that model with the profile
(`codegen.with_profile`); a change to the RTL or to the build options makes the profile
stale, and models are built without it until it is taken again. It is opt-in because it
costs two more builds and a run (three times a cold build): a first build stays as short
as it can be.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from npuemu.sim.build import BUILD_ROOT, BuiltModel, build_npu_sim
from npuemu.sim.cocotb_run import run_cocotb
from npuemu.sim.codegen import DEFAULT, CodeGen, profile_digest, profile_folder
from xrt.hw.targets import target

__all__ = ["WORKLOAD", "take_profile"]

WORKLOAD = "npuemu.sim.pgo_workload"


def take_profile(
    target_name: str,
    *,
    assertions: bool = True,
    codegen: CodeGen = DEFAULT,
    build_root: Path | None = None,
) -> BuiltModel:
    """Profile `target_name`'s model and build it with the profile; the built model.

    Raises:
        ModelBuildError: a build failed.
        CocotbTestsFailedError: the profile workload failed (its log in the message).
        RuntimeError: the run wrote no profile.
    """
    root = build_root or BUILD_ROOT
    label = target_name if assertions else f"{target_name}-noassert"
    folder = profile_folder(root, label)
    gen = replace(codegen, name=f"{codegen.name}-gen", pgo="generate", profile_dir=str(folder))
    instrumented = build_npu_sim(target_name, assertions=assertions, codegen=gen, build_root=root)
    shutil.rmtree(folder, ignore_errors=True)  # another model's profile
    folder.mkdir(parents=True)
    cfg = target(target_name)
    with tempfile.TemporaryDirectory(prefix="npu-emu-pgo-") as tmp_name:
        tmp = Path(tmp_name)
        files = {m: tmp / f"{m}.bin" for m in ("udma", "plddr")}
        for m, path in files.items():
            with path.open("wb") as f:
                f.truncate(cfg.memory(m).size)
        run_cocotb(
            instrumented,
            WORKLOAD,
            test_dir=tmp / "run",
            plusargs=[f"+npu_mem_{m}={p}" for m, p in files.items()],
            extra_env={"NPU_TARGET": target_name, "NPU_MEM_PLDDR": str(files["plddr"])},
        )
    digest = profile_digest(folder)
    if digest is None:
        raise RuntimeError(f"the profile run of {instrumented.build_dir} wrote no profile")
    (folder / "profile.json").write_text(
        json.dumps({"model": instrumented.digest, "codegen": codegen.key(), "gcda": digest})
    )
    return build_npu_sim(target_name, assertions=assertions, codegen=codegen, build_root=root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m npuemu.sim.pgo", description=__doc__.splitlines()[0]
    )
    parser.add_argument("targets", nargs="+", help="buyi, zg330")
    parser.add_argument("--no-assertions", action="store_true", help="the -noassert models")
    args = parser.parse_args(argv)
    for name in args.targets:
        model = take_profile(name, assertions=not args.no_assertions)
        print(f"{name}: {model.build_dir} (compiled with its profile)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
