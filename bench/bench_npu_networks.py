"""Whole light networks on the simulated NPU (the RTL behind a real server), per target:
operators per backend, NPU launches, simulated cycles, the main program's MAC
utilisation, forward wall time, and bit-exactness against the host.

Each network of the onnx wheel gets random weights (tests/network/light_models.py),
is written to a temporary folder and run as a user runs it:
``xrt run MODEL --quantize --device URL --compare host --json``.

    .venv/bin/python bench/bench_npu_networks.py [--models shufflenet,squeezenet,resnet50]
                                                 [--targets buyi,zg330] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "network"))

import onnx  # noqa: E402
from light_models import with_random_weights  # noqa: E402

from npuemu.server.launch import ServerProcess  # noqa: E402

XRT = str(Path(sys.executable).with_name("xrt"))


def run_one(model: Path, url: str, runs: int) -> dict:
    """One `xrt run` of `model` on the device at `url`; its JSON summary."""
    cmd = [XRT, "run", str(model), "--quantize", "--calib", "2", "--device", url]
    cmd += ["--compare", "host", "--json", "--runs", str(runs)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="shufflenet,squeezenet,resnet50")
    parser.add_argument("--targets", default="buyi,zg330")
    parser.add_argument("--runs", type=int, default=2, help="forwards per network (p50)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="npu-networks-") as tmp:
        models = {}
        for name in args.models.split(","):
            models[name] = Path(tmp) / f"{name}.onnx"
            onnx.save(with_random_weights(name, 0), models[name])
        for target in args.targets.split(","):
            with ServerProcess.start(target=target, devices=1) as srv:
                for name, path in models.items():
                    doc = run_one(path, srv.url, args.runs)
                    npu = doc["npu"]
                    counts = doc["placement"]["counts"]
                    on_npu = sum(n for backend, n in counts.items() if backend != "HostBackend")
                    rows.append((
                        name, target, f"{on_npu}/{doc['ops']}", npu["launches"],
                        npu["cycles"], npu["main_program"].get("mac_utilisation"),
                        doc["forward_ms"]["p50"], doc["compare"]["bit_exact"],
                    ))  # fmt: skip
                    print(f"[{name} {target}] done", flush=True)
    load_after = os.getloadavg()
    print(
        f"\nload average (1, 5, 15 min): before {' '.join(f'{x:.1f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.1f}' for x in load_after)} ({os.cpu_count()} cores)\n"
    )
    print(
        "| network | target | ops on the NPU backend | launches | cycles | main MAC use "
        "| forward p50 | bit-exact |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, target, share, launches, cycles, mac, p50, exact in rows:
        mac_text = f"{mac:.1%}" if mac is not None else "-"
        print(
            f"| {name} | {target} | {share} | {launches} | {cycles:,} | {mac_text} | "
            f"{p50 / 1000:.2f} s | {'yes' if exact else 'NO'} |"
        )


if __name__ == "__main__":
    main()
