"""Where a register read's time goes on the server and in the worker, measured with py-spy.

    .venv/bin/python bench/profile_register_hop.py [--reads 3000] [--rate 2000]

Starts one ``npu-emu serve`` (Buyi, one device), records the server process and its
simulation worker with py-spy (sampling, ``--idle`` off: only time on CPU) while a client
makes `--reads` ReadRegister calls, and prints for each process the functions with the
most samples of their own ("self") and, for the request path, inclusive shares. Needs
ptrace rights (root in a container, or kernel.yama.ptrace_scope = 0).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import tempfile
import time
from pathlib import Path

from npuemu.server.launch import ServerProcess
from xrt.hw.regs import NPU
from xrt.transport.grpc import GrpcTransport

# Leaf frames that are a process waiting for the next message, not working on one.
IDLE = (
    "EpollSelector.select",
    "BlockingChannel._fill",
    "_worker (thread.py)",
    "wait (threading.py)",
)


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(c) for c in text]
    return out


def summarize(raw: Path, label: str, top: int) -> None:
    """Self and inclusive sample counts per function from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        frames = [f.split(" (")[0] + " (" + f.split("(")[-1].split(":")[0].split("/")[-1] + ")"
                  for f in stack.split(";") if f]  # fmt: skip
        if not frames or any(w in frames[-1] for w in IDLE):
            continue  # waiting, not working (py-spy's idle detection misses these)
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    print(f"\n== {label}: {total} samples working (waits for the next message left out)")
    print("  self:")
    for f, n in own.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {f}")
    print("  inclusive:")
    for f, n in incl.most_common(top + 10)[: top + 10]:
        print(f"    {100 * n / total:5.1f}%  {f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=3000)
    parser.add_argument("--rate", type=int, default=2000, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # py-spy attaches with ptrace: the server and its worker must stay debuggable.
        srv = ServerProcess.start(target="buyi", devices=1, env={"NPU_EMU_DEBUGGABLE": "1"})
        try:
            t = GrpcTransport(srv.address, ring=False)  # the server path, not the ring
            npu = t.reg_region("npu", NPU)
            addr = npu.base + NPU.register("SCRATCH").offset
            npu.read(addr)
            (worker,) = children(srv.proc.pid)
            spies = {}
            for label, pid in (("server", srv.proc.pid), ("worker", worker)):
                out = Path(tmp) / f"{label}.txt"
                spies[label] = (out, subprocess.Popen(
                    ["py-spy", "record", "--pid", str(pid), "--rate", str(args.rate),
                     "--format", "raw", "--output", str(out), "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                ))  # fmt: skip
            time.sleep(1.0)  # py-spy attaches
            t0 = time.perf_counter()
            for _ in range(args.reads):
                npu.read(addr)
            dt = time.perf_counter() - t0
            for _, proc in spies.values():
                proc.send_signal(2)
            for _, proc in spies.values():
                proc.wait(60)
            t.close()
        finally:
            srv.stop()
        print(f"{args.reads} reads in {dt:.2f} s: {dt / args.reads * 1e6:.0f} us per read")
        for label, (out, _) in spies.items():
            if out.exists():
                summarize(out, label, args.top)
            else:
                print(f"\n== {label}: py-spy recorded nothing (ptrace rights?)")


if __name__ == "__main__":
    main()
