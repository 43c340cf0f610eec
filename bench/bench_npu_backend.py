"""Quantized networks on the simulated NPU through the device server (BuyiBackend/ZG330Backend).

Prints, for a SqueezeNet 1.1-shaped int8 network (default 224x224) on loopback:
``apply`` (compile + upload) and one ``forward`` wall time on Buyi and on ZG330, simulated
cycles, where the intermediates live (the memory planner: packed bytes, on chip on ZG330),
ZG330's engine cycles against Buyi's, MAC utilisation of every convolution from the
engine's counters (merging off: one program per layer), the same forward on HostBackend,
a session made from a snapshot against ``create`` + ``apply``, and the load average.

    python bench/bench_npu_backend.py [--hw 224] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
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
from xrt.backend import BuyiBackend, HostBackend, ZG330Backend  # noqa: E402
from xrt.backend.npu import PROGRAM_CACHE  # noqa: E402
from xrt.network import Network  # noqa: E402
from xrt.quant import quantize_network  # noqa: E402
from xrt.session import Session  # noqa: E402


def _median(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _per_layer(qnet: Network, feeds: dict[str, np.ndarray], dev: xrt.Device) -> None:
    """Each convolution as its own program (merging off): cycles and MAC array use."""
    sess = Session.create([BuyiBackend, HostBackend], qnet, [dev, None])
    npu = sess.backends[0]
    npu.auto_merge = False
    sess.apply()
    rows: list[tuple[str, int, float]] = []

    def note(s: Session, op: object, backend: object, outs: object) -> None:
        if backend is npu and getattr(op, "op_type", "") == "QConv2d":
            st = npu.last_stats
            rows.append((op.name, st.busy_cycles, st.mac_utilisation))  # type: ignore[attr-defined]

    sess.set_post_callback(note)
    sess.forward(feeds)
    print("  per conv layer (merging off): engine cycles, MAC array busy")
    for name, cycles, util in rows:
        print(f"    {name:<28} {cycles:>9} {100 * util:6.1f}%")
    sess.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", type=int, default=224, help="input height and width")
    ap.add_argument("--repeat", type=int, default=3, help="forwards per figure (median)")
    ap.add_argument("--no-per-layer", action="store_true", help="skip the per-layer run")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")

    model = squeezenet11_model(hw=args.hw, classes=1000)
    net = Network.from_onnx(model)
    qnet = quantize_network(net, [random_feeds(model, seed=s) for s in range(2)])
    feeds = random_feeds(model, seed=7)
    print(f"SqueezeNet 1.1-shaped, {args.hw}x{args.hw}, {len(qnet.ops)} ops (int8)")

    with Session.create([HostBackend], qnet).apply() as host:
        want = [t.numpy() for t in host.forward(feeds)]
        host_s = _median(lambda: host.forward(feeds), args.repeat)
    print(f"HostBackend forward: {host_s * 1e3:.1f} ms")

    engine: dict[str, int] = {}
    for target, backend in (("buyi", BuyiBackend), ("zg330", ZG330Backend)):
        with ServerProcess.start(target=target) as srv, xrt.Device.open(srv.url) as dev:
            PROGRAM_CACHE.clear()
            t = time.perf_counter()
            sess = Session.create([backend, HostBackend], qnet, [dev, None]).apply()
            apply_s = time.perf_counter() - t
            got = sess.forward(feeds)
            exact = all(np.array_equal(g.numpy(), w) for g, w in zip(got, want, strict=True))
            c0 = dev.cycles or 0
            fwd_s = _median(lambda s=sess: s.forward(feeds), args.repeat)
            cycles = ((dev.cycles or 0) - c0) // args.repeat
            npu = sess.backends[0]
            stats = npu.last_stats
            engine[target] = stats.busy_cycles
            for ids in sorted({ids for ids in npu.launches if len(ids) > 1}):
                prog, where = npu.program(ids), npu.placement(ids)
                live = [p for p in prog.intermediates if not p.alias_of]
                on_chip = sum(1 for p in live if where[f"intermediate:{p.name}"] == "ocm")
                print(
                    f"  program of {len(ids)} ops: {len(live)} intermediates, "
                    f"{sum(p.nbytes for p in live)} B one after another, packed into "
                    f"{prog.scratch_bytes} B ({prog.ocm_bytes} B on chip); "
                    f"{on_chip} of them in the OCM"
                )
            print(
                f"{backend.__name__}: apply {apply_s:.2f} s, forward {fwd_s:.2f} s (median of "
                f"{args.repeat}), {cycles} simulated cycles per forward (DMA included), "
                f"engine {stats.busy_cycles} cycles, MAC array busy "
                f"{100 * stats.mac_utilisation:.1f}%, bit-exact vs host: {exact}"
            )
            with tempfile.TemporaryDirectory() as tmp:
                snap = Path(tmp) / "squeezenet.snapshot"
                sess.dump_snapshot(snap)
                sess.close()
                PROGRAM_CACHE.clear()
                t = time.perf_counter()
                again = Session.create_with_snapshot(snap, [backend, HostBackend], [dev, None])
                snap_s = time.perf_counter() - t
                again.close()
            print(f"  from snapshot: {snap_s:.2f} s to ready vs create + apply {apply_s:.2f} s")
            if target == "buyi" and not args.no_per_layer:
                _per_layer(qnet, feeds, dev)
    saved = engine["buyi"] - engine["zg330"]
    print(
        f"ZG330 engine cycles vs Buyi: {engine['zg330']} vs {engine['buyi']}: "
        f"{abs(saved)} {'fewer' if saved >= 0 else 'more'} "
        f"({100 * abs(saved) / engine['buyi']:.1f}%)"
    )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
