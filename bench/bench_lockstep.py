"""The cost of ``npu-emu serve --lockstep``: a SqueezeNet forward with and without it.

The light SqueezeNet of the onnx wheel (random weights: tests/network/light_models.py) runs
as a user runs it, ``xrt run MODEL --quantize --device URL --json --runs N``, on a server
started without and then with ``--lockstep`` (every launch of the compute engine replayed
on the golden model in the device's worker, docs/verification.md "Lockstep"). Printed:
forward p50 and minimum of each, their ratio, the launches the workers checked (from their
logs) and the load average before and after.

    .venv/bin/python bench/bench_lockstep.py [--target buyi] [--runs 3] [--model squeezenet]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "network"))

import onnx  # noqa: E402
from bench_npu_networks import run_one  # noqa: E402  (bench/ is on sys.path as the script's folder)
from light_models import with_random_weights  # noqa: E402

from npuemu.server.launch import ServerProcess  # noqa: E402


def checked_launches(log_dir: Path) -> str:
    """The workers' last lockstep summary line (their logs in `log_dir`), or '-'."""
    last = "-"
    for path in sorted(log_dir.rglob("worker.log")):
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if "lockstep:" in line:
                    last = line.split("lockstep:", 1)[1].strip()
    return last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="squeezenet")
    parser.add_argument("--target", default="buyi")
    parser.add_argument("--runs", type=int, default=3, help="forwards per server (p50)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="npu-lockstep-") as tmp:
        model = Path(tmp) / f"{args.model}.onnx"
        onnx.save(with_random_weights(args.model, 0), model)
        logs = Path(tmp) / "logs"  # kept after the server stops: the workers' summaries
        for extra in ((), ("--lockstep", "--log-dir", str(logs))):
            with ServerProcess.start(target=args.target, devices=1, extra_args=extra) as srv:
                doc = run_one(model, srv.url, args.runs)
            label = "with --lockstep" if extra else "without"
            rows.append((label, doc, checked_launches(logs) if extra else "-"))
            print(f"[{label}] done", flush=True)
    load_after = os.getloadavg()
    print(
        f"\nload average (1, 5, 15 min): before {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.2f}' for x in load_after)} ({os.cpu_count()} cores)\n"
    )
    print(f"{args.model} on {args.target}, {args.runs} forwards per server\n")
    print("| server | forward p50 | forward min | launches per forward | bit-exact |")
    print("|---|---|---|---|---|")
    for label, doc, _ in rows:
        fwd = doc["forward_ms"]
        print(
            f"| {label} | {fwd['p50'] / 1000:.2f} s | {fwd['min'] / 1000:.2f} s "
            f"| {doc['npu']['launches']} | {'yes' if doc['compare']['bit_exact'] else 'NO'} |"
        )
    print(f"\nthe lockstep worker's last summary: {rows[1][2]}")
    base, lock = rows[0][1]["forward_ms"]["p50"], rows[1][1]["forward_ms"]["p50"]
    print(f"\nlockstep / plain forward p50: {lock / base:.2f}x")


if __name__ == "__main__":
    main()
