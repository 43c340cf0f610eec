"""``xrt run``: open the device, load (and quantize) the model, bind, run, report.

Without ``--device`` a run that has work for an NPU (``--quantize``, ``--backends`` naming
an NPU backend, a quantized network file, a container compiled for an NPU) runs on the
default device, `xrt.device.default_device_url` (``$XRT_DEVICE``, else the embedded
``sim://buyi``, or ``sim://zg330`` for ``--backends zg330`` or a ZG330 container: no server
needed); a float model runs on the host alone, as ``--device host://`` does.

The order matters to a CI job: the device is opened first, so a wrong URL, a refused
connection or a wrong token fails within a second, before the model is imported or
calibrated; placement is reported on every run and checked before any forward when
``--require-npu`` asks; the device's lease is released however the run ends. A MODEL that
is a program container (``xrt compile``; recognised by its content, whatever its name) is
loaded onto the device as it is, without compiling (`xrt.aic.Qpc.create_session`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import numpy as np

from xrt import exitcodes
from xrt._compare_onnx import check_tolerances, compare_onnxruntime
from xrt._interrupt import check_interrupt, sigint_deferred
from xrt._model_input import check_npu_gets_integers, inputs, load_network, quantize
from xrt.aic import Qpc
from xrt.backend import Backend, NpuBackend, backend_types, get_backend_type
from xrt.cli_output import error_document
from xrt.device import Device, HostDevice, default_device_url
from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, is_quantized_op
from xrt.network._onnx_ctx import require_onnx
from xrt.npu_device import NpuDevice
from xrt.progress import progress
from xrt.session import PlacementReport, Session
from xrt.session.snapshot import is_snapshot_file
from xrt.tuning import TuningRecords

if TYPE_CHECKING:
    from xrt.quant import QuantReport

__all__ = ["run_command"]


def run_command(args: argparse.Namespace) -> int:
    """The ``xrt run`` command (arguments as `xrt.cli` parses them); returns the exit code."""
    if args.runs < 1:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"--runs must be >= 1, got {args.runs}")
    if args.quantize and args.calib < 1:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"--calib must be >= 1, got {args.calib}")
    if args.tune and not args.tuning_records:
        raise XrtError(ErrorCode.OUT_OF_RANGE, "--tune needs --tuning-records FILE to keep them")
    container = is_snapshot_file(args.model)
    if container:
        _check_container_args(args)
    check_tolerances(args, container)
    record = getattr(args, "record", None)
    if record is not None and not args.device:
        raise XrtError(ErrorCode.WRONG_TYPE, "--record needs the board's --device axi://...")
    with ExitStack() as opened:
        devices = _Devices(opened)
        asked = _npu_asked(args.backends)
        if args.device:
            devices.open(_recorded_url(args.device, record))
        elif asked is not None or (args.quantize and args.backends is None):
            # Before the model is imported: a bad URL fails at once.
            devices.open(default_device_url(asked.TARGET if asked is not None else None))
        if container:
            return _run_container(args, devices)
        with sigint_deferred():  # a Ctrl-C inside onnx's native module init crashed xrt run
            require_onnx()
        net = load_network(args.model)
        quant = None
        if args.quantize:
            net, quant = quantize(net, args)
        if devices.device is None and args.backends is None and _has_quantized(net):
            devices.open(default_device_url())  # a network file quantized already
        device = devices.device
        names = _backend_names(args.backends, device)
        types = [get_backend_type(n) for n in names]
        check_npu_gets_integers(net, types, quantized=args.quantize)
        feed, sources = inputs(net, args.input, args.seed)

        def prepare(configure: Callable[[Session], None]) -> Session:
            sess = Session.create(types, net, _devices(types, device))
            configure(sess)  # tuning records, before apply compiles
            with progress(f"applying the network to {', '.join(names)}"):
                return sess.apply()

        return _Run(args, net, names, device, feed, sources, prepare, quant).execute()


class _Devices:
    """The device of one run: ``--device``, else the default device (`default_device_url`:
    ``$XRT_DEVICE``, else the embedded ``sim://buyi``) when the run has work for an NPU;
    closed when the run ends, however it ends."""

    def __init__(self, opened: ExitStack) -> None:
        self.device: Device | None = None
        self._opened = opened

    def open(self, url: str) -> Device:
        self.device = self._opened.enter_context(Device.open(url))
        return self.device


def _npu_asked(backends: str | None) -> type[Backend] | None:
    """The first NPU backend ``--backends`` names, if any (an unknown name fails here, at
    once)."""
    if backends is None:
        return None
    names = [n.strip() for n in backends.split(",") if n.strip()]
    return next((t for n in names if not (t := get_backend_type(n)).is_host), None)


def _has_quantized(net: Network) -> bool:
    return any(is_quantized_op(op, net.values) for op in net.ops)


def _recorded_url(url: str, record: str | None) -> str:
    """``--record FILE``: the device URL with ``record=FILE`` (an ``axi://`` board's session;
    the emulator records leases server-side, ``npu-emu serve --record``)."""
    if record is None:
        return url
    if not url.startswith("axi://"):
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"--record records a board session (an axi:// --device), not {url!r}: record "
            "an emulator's leases with `npu-emu serve --record DIR`",
        )
    return f"{url}{'&' if '?' in url else '?'}{urlencode({'record': record})}"


def _check_container_args(args: argparse.Namespace) -> None:
    """A program container is quantized and compiled already, for its backends."""
    flags = (
        ("--quantize", args.quantize),
        ("--backends", args.backends),
        ("--tuning-records", args.tuning_records),
    )
    given = [f for f, on in flags if on]
    if given or args.calib_dir is not None:
        flags = ", ".join(given + (["--calib-dir"] if args.calib_dir is not None else []))
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{args.model} is a program container (quantized and compiled by xrt compile): "
            f"leave out {flags}",
        )


def _run_container(args: argparse.Namespace, devices: _Devices) -> int:
    """``xrt run CONTAINER``: load it on the device (no compile) and run it; without
    ``--device``, a container compiled for an NPU runs on the default device."""
    with progress(f"loading {Path(args.model).name}"):
        qpc = Qpc.from_file(args.model)
    info = qpc.info()
    device = devices.device
    if device is None and info.target:
        device = devices.open(default_device_url(info.target))
    net = qpc.network()
    by_class = {t: name for name, t in backend_types().items()}
    names = [by_class.get(t, t.__name__) for t in qpc.backend_types()]
    feed, sources = inputs(net, args.input, args.seed)

    def prepare(_configure: Callable[[Session], None]) -> Session:
        with progress(f"loading the programs onto {device if device is not None else 'the host'}"):
            return qpc.create_session(device)

    run = _Run(args, net, names, device, feed, sources, prepare)
    run.summary["container"] = {
        "target": info.target,
        "hw_version": info.hw_version,
        "npu_programs": info.npu_programs,
    }
    hw = f" (hardware {info.hw_version})" if info.hw_version else ""
    run.say(
        f"container {args.model}: compiled for {info.target or 'the host'}{hw}, "
        f"{info.npu_programs} NPU program(s)"
    )
    return run.execute()


# -- what to run on -----------------------------------------------------------------------


def _backend_names(text: str | None, device: Device | None) -> list[str]:
    """``--backends``, or the default: the device's NPU backend, then host."""
    if text is None:
        target = device.target if device is not None else None
        return [target, "host"] if target else ["host"]
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise XrtError(ErrorCode.OUT_OF_RANGE, "--backends names no backend")
    return names


def _devices(types: list[type[Backend]], device: Device | None) -> list[Device | None]:
    """The device of each backend: `device` for NPU backends; host backends take it only
    when it is a host device (``host://?capacity=...``), else the default host device."""
    out: list[Device | None] = []
    for t in types:
        if t.is_host:
            out.append(device if isinstance(device, HostDevice) else None)
        else:
            out.append(device)
    return out


# -- running and reporting ------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def _first_difference(a: np.ndarray, b: np.ndarray) -> str | None:
    """None when `a` and `b` are equal bit for bit, else where and how they first differ."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/type {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    if a.dtype.kind == "f":  # compare the bits: -0.0 is not 0.0, a NaN equals its twin
        bits = np.dtype(f"u{a.dtype.itemsize}")
        same = np.ascontiguousarray(a).view(bits) == np.ascontiguousarray(b).view(bits)
    else:
        same = a == b
    diff = np.argwhere(~same)
    if diff.size == 0:
        return None
    index = tuple(int(i) for i in diff[0])
    return f"{len(diff)} element(s) differ; first at {list(index)}: {a[index]} vs {b[index]}"


@dataclass
class _NpuFigures:
    """The NPU launches of the last forward: the main program is the longest one."""

    launches: int = 0
    cycles: int = 0
    main_label: str = ""
    main_cycles: int = 0
    main_mac: float = 0.0
    spurious_irqs: int = 0
    backends: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "launches": self.launches,
            "cycles": self.cycles,
            "spurious_irqs": self.spurious_irqs,
            "main_program": {
                "label": self.main_label,
                "cycles": self.main_cycles,
                "mac_utilisation": round(self.main_mac, 4),
            },
        }


class _Run:
    """One ``xrt run`` after its arguments are checked: bind, apply, forward, report."""

    def __init__(
        self,
        args: argparse.Namespace,
        net: Network,
        names: list[str],
        device: Device | None,
        feed: dict[str, np.ndarray],
        sources: list[str],
        prepare: Callable[[Callable[[Session], None]], Session],
        quant: QuantReport | None = None,
    ) -> None:
        self.args, self.net, self.names, self.prepare = args, net, names, prepare
        self.quant = quant  # --quantize: what keeping the accumulator bound changed
        self.records: TuningRecords | None = None  # --tuning-records, once loaded
        self.device, self.feed, self.sources = device, feed, sources
        self.summary: dict[str, Any] = {
            "model": args.model,
            "network": net.name,
            "ops": len(net.ops),
            "backends": names,
            "device": str(device.url) if device is not None else None,
        }
        if quant is not None:
            self.summary["quantizer"] = quant.to_dict()

    def say(self, text: str = "") -> None:
        """Human-readable output (the JSON summary replaces it with --json)."""
        if not self.args.json:
            print(text)

    def _arm_faults(self) -> None:
        """``--fault``: armed after the session is applied, before the first forward."""
        specs = getattr(self.args, "fault", None) or []
        if not specs:
            return
        if not isinstance(self.device, NpuDevice):
            raise XrtError(
                ErrorCode.WRONG_TYPE, "--fault needs a simulated NPU device (sim://, grpc://)"
            )
        for spec in specs:
            self.device.inject_fault(spec)
            self.say(f"fault armed: {spec}")

    def _fault_report(self) -> None:
        if not getattr(self.args, "fault", None) or not isinstance(self.device, NpuDevice):
            return
        done = self.device.faults()
        self.summary["faults"] = [{"fault": f.fault.spec, "hits": f.hits} for f in done]
        for f in done:
            self.say(f"fault {f.describe()}")

    def execute(self) -> int:
        args = self.args
        if self.quant is not None:
            self.say(f"quantizer: {self.quant.line()}")
        with self.prepare(self._tuning) as sess:
            if self.records is not None:
                self._tuning_report(sess, self.records)
            report = sess.placement()
            self.summary["placement"] = report.to_dict()
            if args.require_npu and report.host_quantized:
                return self._refuse_placement(report)
            sess.enable_time_profile(args.profile)
            sess.enable_trace(args.trace is not None)
            self._arm_faults()
            outs, walls = self._forwards(sess)
            self._report(sess, report, outs, walls)
            self._fault_report()
        code = exitcodes.OK
        if args.compare == "onnxruntime":
            code = self._compare_onnxruntime(outs)
        elif args.compare:
            code = self._compare(outs)
        if args.output:
            np.savez(args.output, **outs)
            self.summary["output_file"] = args.output
            self.say(f"outputs: {args.output} ({', '.join(outs)})")
        if args.json:
            doc = self.summary
            if code != exitcodes.OK:  # every failure under --json has its "error"
                why = f"--compare {args.compare}: the outputs differ from the reference"
                doc = {**doc, **error_document(code, why)}
            print(json.dumps(doc, indent=1, default=str))
        return code

    def _tuning(self, sess: Session) -> None:
        """Load ``--tuning-records`` into the session's backends (`records`: None without)."""
        if not self.args.tuning_records:
            return
        records = TuningRecords.load(self.args.tuning_records)
        sess.set_tuning(records, tune=self.args.tune)
        for b in sess.backends:
            if isinstance(b, NpuBackend):  # the host times its kernels: no choice of measure
                b.tune_measure = self.args.tune_measure
        self.records = records

    def _tuning_report(self, sess: Session, records: TuningRecords) -> None:
        """Save new records (``--tune``) and say what tuning did and passed over."""
        reports = [b.tune_report for b in sess.backends if isinstance(b, NpuBackend)]
        tuned = sum(r.tuned for r in reports)
        changed = sum(r.changed for r in reports)
        reused = sum(r.reused for r in reports)
        if self.args.tune:
            records.save(self.args.tuning_records)
        summary = {
            "file": self.args.tuning_records,
            "records": len(records),
            "tuned": tuned,
            "changed": changed,
            "reused": reused,
            "seconds": round(sum(r.seconds for r in reports), 3),
            "notes": list(records.notes),
        }
        self.summary["tuning"] = summary
        self.say(
            f"tuning records {self.args.tuning_records}: {len(records)} record(s); NPU "
            f"layers {reused} from records, {tuned} measured ({changed} changed the tiling, "
            f"{summary['seconds']} s)" + (", saved" if self.args.tune else "")
        )
        for line in records.notes:
            self.say(f"  note: {line}")

    def _refuse_placement(self, report: PlacementReport) -> int:
        left = report.host_quantized
        why = f"--require-npu: {len(left)} quantized operator(s) stay on the host"
        if self.args.json:
            print(json.dumps({**self.summary, **error_document(exitcodes.PLACEMENT, why)}))
        for line in report.summary_lines():
            print(line, file=sys.stderr)
        print(f"xrt run: {why}", file=sys.stderr)
        return exitcodes.PLACEMENT

    def _forwards(self, sess: Session) -> tuple[dict[str, np.ndarray], list[float]]:
        walls: list[float] = []
        outs: dict[str, np.ndarray] = {}
        npu = [b for b in sess.backends if isinstance(b, NpuBackend)]
        for i in range(self.args.runs):
            check_interrupt()  # a Ctrl-C a finalizer swallowed during the last run
            marks = [len(b.launch_stats) for b in npu]
            what = "running forward" + (f" {i + 1}/{self.args.runs}" if self.args.runs > 1 else "")
            with progress(what):
                t0 = time.perf_counter()
                tensors = sess.forward(self.feed)
                walls.append(time.perf_counter() - t0)
            outs = {n: t.numpy() for n, t in zip(sess.outputs, tensors, strict=True)}
        self.npu = self._npu_figures(npu, marks if npu else [])
        return outs, walls

    @staticmethod
    def _npu_figures(backends: list[NpuBackend], marks: list[int]) -> _NpuFigures:
        fig = _NpuFigures()
        for b, mark in zip(backends, marks, strict=True):
            stats = b.launch_stats[mark:]
            labels = b.launch_labels[mark:]
            fig.backends.append(type(b).__name__)
            fig.launches += len(stats)
            fig.cycles += sum(s.busy_cycles for s in stats)
            fig.spurious_irqs += sum(s.spurious_irqs for s in stats)
            for label, s in zip(labels, stats, strict=True):
                if s.busy_cycles > fig.main_cycles:
                    fig.main_label, fig.main_cycles = label, s.busy_cycles
                    fig.main_mac = s.mac_utilisation
        return fig

    def _report(
        self,
        sess: Session,
        report: PlacementReport,
        outs: dict[str, np.ndarray],
        walls: list[float],
    ) -> None:
        args, net = self.args, self.net
        traced = sess.write_trace(args.trace) if args.trace is not None else ""
        self.say(
            f"model {args.model}: network {net.name!r}, {len(net.ops)} ops; "
            f"backends {', '.join(self.names)}"
        )
        inputs = {}
        for n, src in zip(net.inputs, self.sources, strict=True):
            t = net.values[n]
            inputs[n] = {"type": t.dtype.manual_name, "shape": list(t.shape), "from": src}
            self.say(f"input {n!r}: {t.dtype.manual_name}{list(t.shape)} from {src}")
        self.summary["inputs"] = inputs
        self.summary["outputs"] = {
            n: _print_output(self, n, a, net.values[n], max(args.values, 0))
            for n, a in outs.items()
        }
        for line in report.summary_lines():
            self.say(line)
        if args.profile and report.uses_accelerator:
            self.say("where each unit ran:")
            bindings = sess.backend_bindings()
            for unit in sess.execution_units():
                text = unit.describe()
                if not text.endswith(type(bindings[unit.op_id]).__name__):
                    text += f" on {type(bindings[unit.op_id]).__name__}"
                self.say(f"  {text}")
        if self.npu.launches:
            n = self.npu
            self.summary["npu"] = n.to_dict()
            self.say(
                f"{'/'.join(n.backends)}: {n.launches} launch(es), {n.cycles} cycles; main "
                f"program {n.main_cycles} cycles, MAC array busy {100 * n.main_mac:.1f}% of "
                f"them ({n.main_label[:80]}{'...' if len(n.main_label) > 80 else ''})"
            )
            if n.spurious_irqs:
                self.say(f"  {n.spurious_irqs} spurious interrupt(s) waited through")
        ms = [w * 1e3 for w in walls]
        self.summary["forward_ms"] = {
            "runs": len(ms),
            "p50": round(_percentile(ms, 50), 3),
            "p99": round(_percentile(ms, 99), 3),
            "min": round(min(ms), 3),
            "max": round(max(ms), 3),
        }
        if len(ms) == 1:
            self.say(f"forward: {ms[0]:.3f} ms")
        else:
            self.say(
                f"forward: {len(ms)} runs, p50 {_percentile(ms, 50):.3f} ms, "
                f"p99 {_percentile(ms, 99):.3f} ms (min {min(ms):.3f}, max {max(ms):.3f})"
            )
        if args.profile:
            self.say(sess.profile_table())
            self.say(sess.profile_summary())
            self.say(sess.memory_plan.summary())
        if args.trace is not None:
            self.say(f"trace: {args.trace} ({traced}; ui.perfetto.dev)")

    def _compare_onnxruntime(self, outs: dict[str, np.ndarray]) -> int:
        with progress("running the onnxruntime reference"):
            result = compare_onnxruntime(
                self.args.model, self.feed, outs, self.args.atol, self.args.rtol
            )
        self.summary["compare"] = result.to_dict()
        for line in result.lines():
            self.say(line)
            if self.args.json and not result.ok:
                print(line, file=sys.stderr)
        return exitcodes.OK if result.ok else exitcodes.MISMATCH

    def _compare(self, outs: dict[str, np.ndarray]) -> int:
        """Run the same network on the host backend and compare bit for bit."""
        host = get_backend_type("host")
        with Session.create([host], self.net) as ref, progress("running the host reference"):
            ref.apply()
            expected = {
                n: t.numpy() for n, t in zip(ref.outputs, ref.forward(self.feed), strict=True)
            }
        problems = {
            n: why for n in outs if (why := _first_difference(outs[n], expected[n])) is not None
        }
        self.summary["compare"] = {"against": "host", "bit_exact": not problems, **problems}
        if not problems:
            self.say(f"compare host: bit-exact ({len(outs)} output(s))")
            return exitcodes.OK
        for n, why in problems.items():
            line = f"compare host: output {n!r} differs: {why}"
            self.say(line)
            if self.args.json:
                print(line, file=sys.stderr)
        return exitcodes.MISMATCH


def _print_output(
    run: _Run, name: str, arr: np.ndarray, t: TensorType, n_values: int
) -> dict[str, Any]:
    """Print one output (unless --json) and return its summary (the shape it has: a run-time
    shape is known once computed)."""
    info: dict[str, Any] = {"type": t.dtype.manual_name, "shape": list(arr.shape)}
    run.say(f"output {name!r}: {t.dtype.manual_name}{list(arr.shape)}")
    flat = arr.reshape(-1)
    if flat.size == 0:
        run.say("  (empty)")
        return info
    shown = ", ".join(f"{v:.6g}" if arr.dtype.kind == "f" else str(v) for v in flat[:n_values])
    more = f" ... ({flat.size} values)" if flat.size > n_values else ""
    run.say(f"  values: [{shown}{more}]")
    a = flat.astype(np.float64)
    info.update(min=float(a.min()), max=float(a.max()), mean=float(a.mean()))
    run.say(f"  min {a.min():.6g}  max {a.max():.6g}  mean {a.mean():.6g}")
    classes = arr.shape[-1] if arr.ndim in (1, 2) else 0
    if classes >= 5 and (arr.ndim == 1 or arr.shape[0] == 1):
        top = np.argsort(-a, kind="stable")[:5]
        info["top5"] = [int(i) for i in top]
        run.say("  top-5: " + ", ".join(f"{int(i)} ({a[i]:.6g})" for i in top))
    return info
