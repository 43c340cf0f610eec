"""``npu-emu-farm``: the farm's services (docs/farm.md).

npu-emu-farm export [--device grpc://HOST:PORT] [--advertise HOST] [-c COORDINATOR] [-n NAME]
npu-emu-farm reaper [-c COORDINATOR] [--grace SECONDS]
npu-emu-farm status [-c COORDINATOR] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

__all__ = ["main"]


def _status(args: argparse.Namespace) -> int:
    from xrt.errors import XrtError
    from xrt.farm import FarmClient, iter_places

    try:
        client = FarmClient(args.coordinator)
    except XrtError as exc:
        print(f"npu-emu-farm status: {exc}", file=sys.stderr)
        return 1
    places = []
    with client:
        for place, devices in sorted(iter_places(client), key=lambda pd: pd[0].name):
            places.append(
                {
                    "place": place.name,
                    "tags": dict(sorted(place.tags.items())),
                    "acquired": place.acquired or None,
                    "reservation": place.reservation or None,
                    "devices": [
                        {
                            "path": "/".join(d.path),
                            "url": d.grpc_url,
                            "target": d.target,
                            "state": client.extra(d).get("state"),
                            "available": bool(d.avail),
                            "reason": client.extra(d).get("reason") or None,
                        }
                        for d in devices
                    ],
                }
            )
    if args.json:
        print(json.dumps({"coordinator": client.address, "places": places}, indent=1))
        return 0
    for p in places:
        tags = " ".join(f"{k}={v}" for k, v in p["tags"].items())
        held = f"acquired by {p['acquired']}" if p["acquired"] else "free"
        if p["reservation"]:
            held += f", reservation {p['reservation']}"
        print(f"{p['place']} [{tags}] {held}")
        for d in p["devices"]:
            avail = "available" if d["available"] else f"UNAVAILABLE: {d['reason']}"
            print(f"  {d['path']}: {d['url']} {d['state'] or '?'}, {avail}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="npu-emu-farm", description="Simulated NPUs on labgrid.")
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="command", required=True)
    from npuemu.farm import exporter, reaper

    exporter.add_arguments(sub.add_parser("export", help="export a server's devices"))
    reaper.add_arguments(sub.add_parser("reaper", help="give back places left unleased"))
    s = sub.add_parser("status", help="places, their devices and lease states")
    s.add_argument("-c", "--coordinator", default=None)
    s.add_argument("--json", action="store_true", help="print the places as one JSON document")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
    )
    if args.command == "export":
        return exporter.run(args)
    if args.command == "reaper":
        return reaper.run(args)
    return _status(args)


if __name__ == "__main__":
    sys.exit(main())
