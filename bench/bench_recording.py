"""What recording a lease costs (``npu-emu serve --record``), and what replaying it costs.

A quantized SqueezeNet 1.1-shaped network (default 224x224) runs on the simulated NPU
through a real server, as a user runs it (a Session with the NPU backend on
``grpc://...``): forward wall time (median of ``--runs``) on a server without recording
(the local client takes its fast paths: the register ring and the mapped memory), the
same with those paths off (``?local=0``: what a recording server leaves a client), and on
a server with ``--record``; the ratio recorded / plain (the issue's goal: at most 1.1x);
the recording's size and what writing it cost the server; and ``npu-emu replay --check``
of that recording against the recorded lease's own wall time. With the load average.

    python bench/bench_recording.py [--target buyi] [--hw 224] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "network"))

from netutil import random_feeds  # noqa: E402
from onnx_zoo import squeezenet11_model  # noqa: E402

import xrt  # noqa: E402
from npuemu.server.launch import ServerProcess  # noqa: E402
from npuemu.server.recording import lease_digest, read_recording  # noqa: E402
from xrt.backend import BuyiBackend, HostBackend, ZG330Backend  # noqa: E402
from xrt.network import Network  # noqa: E402
from xrt.quant import quantize_network  # noqa: E402
from xrt.session import Session  # noqa: E402


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_lease(url: str, backend: type, qnet: Network, feeds: dict, want: list, runs: int) -> dict:
    """One lease: apply, a warm-up forward (checked against the host), `runs` timed
    forwards. Its figures and lease id."""
    t0 = time.perf_counter()
    with xrt.Device.open(url) as dev:
        lease = dev.transport.lease_id  # type: ignore[attr-defined]
        fast = dev.transport.local_fast_path  # type: ignore[attr-defined]
        with Session.create([backend, HostBackend], qnet, [dev, None]).apply() as sess:
            got = [t.numpy() for t in sess.forward(feeds)]
            exact = all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                sess.forward(feeds)
                times.append(time.perf_counter() - t)
    return {
        "lease": lease,
        "fast": fast,
        "exact": exact,
        "forward_s": statistics.median(times),
        "lease_s": time.perf_counter() - t0,
    }


def register_reads(url: str, n: int) -> float:
    """Median seconds of one register read through the server (no ring), `n` reads."""
    with xrt.Device.open(url) as dev:
        region = dev.get_reg_region("npu")
        times = []
        for _ in range(n):
            t = time.perf_counter()
            region.read(0x40, relative=True)
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="buyi", choices=("buyi", "zg330"))
    ap.add_argument("--hw", type=int, default=224, help="input height and width")
    ap.add_argument("--runs", type=int, default=3, help="timed forwards per lease (median)")
    ap.add_argument("--reads", type=int, default=1000, help="single register reads timed")
    args = ap.parse_args()
    load_before = _load()
    backend = BuyiBackend if args.target == "buyi" else ZG330Backend
    model = squeezenet11_model(hw=args.hw, classes=1000)
    qnet = quantize_network(Network.from_onnx(model), [random_feeds(model, seed=s) for s in (0, 1)])
    feeds = random_feeds(model, seed=7)
    with Session.create([HostBackend], qnet).apply() as host:
        want = [t.numpy() for t in host.forward(feeds)]

    results = {}
    with ServerProcess.start(target=args.target) as srv:
        results["plain"] = run_lease(srv.url, backend, qnet, feeds, want, args.runs)
        results["plain, local=0"] = run_lease(
            srv.url + "?local=0", backend, qnet, feeds, want, args.runs
        )
        read_plain = register_reads(srv.url + "?local=0", args.reads)
    with tempfile.TemporaryDirectory(prefix="npu-rec-bench-") as tmp:
        folder = Path(tmp)
        with ServerProcess.start(target=args.target, extra_args=("--record", tmp)) as srv:
            results["--record"] = run_lease(srv.url, backend, qnet, feeds, want, args.runs)
            read_recorded = register_reads(srv.url, args.reads)
        log = srv.log
        (path,) = folder.glob(f"*-{lease_digest(results['--record']['lease'])[:8]}.npurec")
        (path_reads,) = set(folder.glob("*.npurec")) - {path}
        reads_size = path_reads.stat().st_size
        rec = read_recording(path)
        writing = re.search(r"MiB, ([\d.]+) ms spent writing \(slowest record ([\d.]+) ms\)", log)
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "npuemu.cli", "replay", str(path), "--check"],
            capture_output=True,
            text=True,
            env={**os.environ, "XRT_PROGRESS": "0"},
            check=False,
        )
        replay_s = time.perf_counter() - t
        size = path.stat().st_size
    load_after = _load()

    print(f"SqueezeNet 1.1-shaped {args.hw}x{args.hw} int8 on {args.target}, {args.runs} runs")
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_after} "
          f"({os.cpu_count()} cores)\n")  # fmt: skip
    print("| server | client fast path | forward, median | bit-exact vs host | whole lease |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {'yes' if r['fast'] else 'no'} | {r['forward_s']:.2f} s | "
            f"{'yes' if r['exact'] else 'NO'} | {r['lease_s']:.2f} s |"
        )
    plain, remote, recorded = (results[k]["forward_s"] for k in results)
    print(
        f"\nforward with --record / plain: {recorded / plain:.2f}x "
        f"(/ plain with local=0: {recorded / remote:.2f}x)"
    )
    print(
        f"one register read through the server, median of {args.reads}: plain (server ring) "
        f"{read_plain * 1e6:.0f} us, recorded {read_recorded * 1e6:.0f} us: "
        f"{read_recorded / read_plain:.2f}x"
    )
    kinds: dict[str, int] = {}
    for r in rec.records:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    print(
        f"recording: {size / (1 << 20):.1f} MiB, {len(rec.records)} records "
        f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})"
    )
    print(f"recording of {args.reads} reads: {reads_size / args.reads:.0f} bytes per read")
    if writing:
        print(f"server time spent writing it: {writing.group(1)} ms (slowest record "
              f"{writing.group(2)} ms)")  # fmt: skip
    verdict = "bit-exact" if done.returncode == 0 and "bit-exact" in done.stdout else "FAILED"
    inner = re.search(r"replay ([\d.]+) s wall", done.stdout)
    print(
        f"replay --check: {replay_s:.2f} s as a command ({inner.group(1) if inner else '?'} s "
        f"replaying, the rest process and worker start), against the recorded lease's "
        f"{results['--record']['lease_s']:.2f} s (apply and {args.runs + 1} forwards): {verdict}"
    )
    if verdict != "bit-exact":
        print(done.stdout + done.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
