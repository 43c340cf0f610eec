"""The farm's figures, on loopback with real processes (docs/farm.md).

- give-back -> open: a job holds the only place, a second one waits; the first gives back
  (close the device, cancel the reservation, release); time until the waiting job has
  opened the device, from the start and from the end of the give-back;
- SIGKILL -> open: a job holding the place is killed; time until a waiting job has opened
  the device (the reaper's grace, `--grace`, is most of it);
- `Device.open("labgrid://PLACE")` against `Device.open("grpc://HOST:PORT/npu0")` on the
  same device, in one process, interleaved (open + close each), and the place lookup alone.

Medians over --repeat rounds. Usage: python bench/bench_farm.py [--repeat 5] [--grace 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import xrt
from npuemu.farm.launch import FarmJob, LoopbackFarm
from xrt.farm import FarmClient


def handover(farm: LoopbackFarm, kill: bool) -> tuple[float, float]:
    """One round: (seconds from give-back start or SIGKILL to the waiting job's open,
    seconds from the give-back's end; nan when killed)."""
    holder = FarmJob(farm)
    try:
        holder.wait_event("opened", 120)
        waiting = FarmJob(farm)
        try:
            with FarmClient(farm.coordinator) as client:
                while not any(r.state.name == "waiting" for r in client.reservations()):
                    time.sleep(0.05)
            if kill:
                t0 = time.time()
                holder.kill()
                opened = waiting.wait_event("opened", 120)["t"]
                result = (opened - t0, float("nan"))
            else:
                released = holder.give_back()
                start = next(e for e in holder.events if e["event"] == "giving_back")["t"]
                opened = waiting.wait_event("opened", 120)["t"]
                result = (opened - start, opened - released["t"])
            waiting.give_back()
            return result
        finally:
            waiting.stop()
    finally:
        holder.stop()


def open_cost(farm: LoopbackFarm, repeat: int) -> dict[str, list[float]]:
    place = farm.places[0]
    times: dict[str, list[float]] = {"grpc://": [], "labgrid://": [], "lookup": []}
    with FarmClient(farm.coordinator) as client:
        client.acquire(place)
        try:
            url = f"labgrid://{place}?coordinator={farm.coordinator}"
            direct = f"grpc://{farm.servers[0].address}/npu0"
            for _ in range(repeat):
                for key, target in (("grpc://", direct), ("labgrid://", url)):
                    t0 = time.perf_counter()
                    xrt.Device.open(target).close()
                    times[key].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                with FarmClient(farm.coordinator) as lookup:
                    lookup.held_device(place)
                times["lookup"].append(time.perf_counter() - t0)
        finally:
            client.release(place)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--grace", type=float, default=3.0, help="the reaper's grace (s)")
    args = ap.parse_args()
    with LoopbackFarm.start(hosts=1, target="zg330", grace_s=args.grace) as farm:
        give = [handover(farm, kill=False) for _ in range(args.repeat)]
        kills = [handover(farm, kill=True) for _ in range(args.repeat)]
        opens = open_cost(farm, max(10, 4 * args.repeat))
    med = statistics.median
    print(f"farm on loopback: 1 host, zg330, reaper grace {args.grace} s, {args.repeat} rounds")
    print(
        f"give-back -> waiting job's open: median {med(g[0] for g in give):.3f} s from its "
        f"start, {med(g[1] for g in give):.3f} s from its end "
        f"(all: {', '.join(f'{g[0]:.2f}' for g in give)})"
    )
    print(
        f"SIGKILL -> waiting job's open: median {med(k[0] for k in kills):.2f} s "
        f"(all: {', '.join(f'{k[0]:.2f}' for k in kills)})"
    )
    g, lg, lk = (med(opens[k]) * 1e3 for k in ("grpc://", "labgrid://", "lookup"))
    print(
        f"open+close: grpc:// {g:.1f} ms, labgrid:// {lg:.1f} ms (ratio {lg / g:.2f}); "
        f"place lookup alone {lk:.1f} ms; medians of {len(opens['lookup'])}"
    )


if __name__ == "__main__":
    main()
