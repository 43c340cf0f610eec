"""Session-ready time from a program container against compiling at apply, on ZG330.

One light network of the onnx wheel (random weights, tests/network/light_models.py),
quantized, is compiled once without a device into a program container
(`xrt.session.container.compile_container`, what ``xrt compile`` does). Then, on one
device of a real ZG330 server, each of these is timed until the session is ready to run
(median of ``--runs``; the program cache is cleared before every compile-at-apply run, so
each one compiles as a new process would):

- ``Session.create`` + ``apply``: bind, compile, upload;
- ``Session.create_with_snapshot(container)``: check, bind, upload the container's programs;
- ``Qpc.from_file`` + ``create_session``: the same through `xrt.aic`;
- ``create_with_snapshot(..., verify=True)``: compiles again to check (what an untrusted
  container costs).

A forward of the container's session is checked bit-exact against the host.

    .venv/bin/python bench/bench_container.py [--model squeezenet] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "network"))

import numpy as np  # noqa: E402
from light_models import random_feeds, with_random_weights  # noqa: E402

from npuemu.server.launch import ServerProcess  # noqa: E402
from xrt import Device  # noqa: E402
from xrt.aic import Qpc  # noqa: E402
from xrt.backend import HostBackend, ZG330Backend  # noqa: E402
from xrt.backend.npu import PROGRAM_CACHE  # noqa: E402
from xrt.network import Network  # noqa: E402
from xrt.quant import quantize_network  # noqa: E402
from xrt.session import Session  # noqa: E402
from xrt.session.container import compile_container  # noqa: E402


def _median_s(make: Callable[[], Session], runs: int, clear_cache: bool) -> float:
    """Median wall seconds of `make()` (each session closed after it is timed)."""
    times = []
    for _ in range(runs):
        if clear_cache:
            PROGRAM_CACHE.clear()
        t0 = time.perf_counter()
        sess = make()
        times.append(time.perf_counter() - t0)
        assert sess.applied
        sess.close()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="squeezenet", help="a light network of the onnx wheel")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per way (median)")
    args = parser.parse_args()
    model = with_random_weights(args.model, 0)
    qnet = quantize_network(
        Network.from_onnx(model), [random_feeds(model, seed=s) for s in range(2)]
    )
    feeds = random_feeds(model, seed=7)
    backends = [ZG330Backend, HostBackend]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-container-") as tmp:
        path = Path(tmp) / f"{args.model}.xrtc"
        PROGRAM_CACHE.clear()
        t0 = time.perf_counter()
        compile_container(qnet, "zg330", path)
        compile_s = time.perf_counter() - t0
        with ServerProcess.start(target="zg330", devices=1) as srv:
            dev = Device.open(srv.url)
            try:
                rows = {
                    "Session.create + apply (compiles)": _median_s(
                        lambda: Session.create(backends, qnet, [dev, None]).apply(),
                        args.runs,
                        clear_cache=True,
                    ),
                    "Session.create_with_snapshot(container)": _median_s(
                        lambda: Session.create_with_snapshot(path, backends, [dev, None]),
                        args.runs,
                        clear_cache=True,
                    ),
                    "Qpc.from_file + create_session": _median_s(
                        lambda: Qpc.from_file(path).create_session(dev),
                        args.runs,
                        clear_cache=True,
                    ),
                    "create_with_snapshot(..., verify=True)": _median_s(
                        lambda: Session.create_with_snapshot(
                            path, backends, [dev, None], verify=True
                        ),
                        args.runs,
                        clear_cache=True,
                    ),
                }
                with Qpc.from_file(path).create_session(dev) as sess:
                    got = [t.numpy() for t in sess.forward(feeds)]
            finally:
                dev.close()
        size = path.stat().st_size
    with Session.create([HostBackend], qnet).apply() as ref:
        want = [t.numpy() for t in ref.forward(feeds)]
    exact = all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    load_after = os.getloadavg()
    print(
        f"\nload average (1, 5, 15 min): before {' '.join(f'{x:.1f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.1f}' for x in load_after)} ({os.cpu_count()} cores)"
    )
    print(
        f"{args.model}, quantized, {len(qnet.ops)} ops; container {size / 1e6:.2f} MB, "
        f"compiled without a device in {compile_s * 1e3:.0f} ms; forward from the container "
        f"bit-exact vs host: {'yes' if exact else 'NO'}\n"
    )
    base = rows["Session.create + apply (compiles)"]
    print(f"| ZG330, session ready (median of {args.runs}) | ms | vs create + apply |")
    print("|---|---|---|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds * 1e3:.1f} | {seconds / base:.2f}x |")
    ready = rows["Session.create_with_snapshot(container)"]
    print(f"\nready from the container {base / ready:.1f}x sooner than create + apply")


if __name__ == "__main__":
    main()
