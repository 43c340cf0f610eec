"""A minimal farm job (the tests' and the bench's): take a device, use it, hold it until
told to give it back (a line on stdin, or end of input), or until killed.

    python -m npuemu.farm.job "target=zg330" WAIT_S

Prints one JSON object per event, each with the wall-clock time ``t``: ``reserving``,
``opened`` (place, device URL, seconds waited for the allocation), ``giving_back`` and
``released``.
"""

from __future__ import annotations

import json
import os
import sys
import time

from npuemu.farm.fixtures import hold_farm_device, parse_tags


def say(**event: object) -> None:
    print(json.dumps({**event, "t": time.time()}), flush=True)


def main() -> int:
    tags, wait_s = parse_tags(sys.argv[1]), float(sys.argv[2])
    say(event="reserving", pid=os.getpid())
    with hold_farm_device(tags, wait_s=wait_s) as held:
        dev = held.device
        dma = dev.get_reg_region("dma")
        dma.write(dma.regs.SCRATCH.address, os.getpid())  # the device is ours: use it
        assert dma.read(dma.regs.SCRATCH.address) == os.getpid()
        say(event="opened", place=held.place, url=str(dev.url), waited=held.waited_s)
        sys.stdin.readline()
        say(event="giving_back", place=held.place)
    say(event="released", place=held.place)
    return 0


if __name__ == "__main__":
    sys.exit(main())
