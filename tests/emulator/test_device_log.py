"""`DeviceLogHub` routing, without a server: whole-word device names, bounded queues."""

from __future__ import annotations

import asyncio
import logging

from npuemu.server.device_log import QUEUE_LINES, DeviceLogHub


def test_records_reach_the_subscribers_of_the_device_they_name() -> None:
    async def run() -> None:
        hub = DeviceLogHub(["npu1", "npu10"])
        hub.attach()
        log = logging.getLogger("npuemu.server")
        old = log.level
        log.setLevel(logging.INFO)
        try:
            one, ten = hub.subscribe("npu1"), hub.subscribe("npu10")
            log.info("device %s: simulation worker restarted", "npu10")
            log.warning("x opened npu1 (ttl 60 s)")
            log.info("nothing about a device")
            await asyncio.sleep(0)  # the records were handed over with call_soon_threadsafe
            assert [ten.queue.get_nowait().message] == ["device npu10: simulation worker restarted"]
            line = one.queue.get_nowait()
            assert (line.message, line.level, line.device) == (
                "x opened npu1 (ttl 60 s)",
                logging.WARNING,
                "npu1",
            )
            assert one.queue.empty() and ten.queue.empty()
            hub.unsubscribe(one)
            log.info("npu1 again")
            await asyncio.sleep(0)
            assert one.queue.empty()
            for i in range(QUEUE_LINES + 5):  # a reader that never reads
                log.info("npu10 line %d", i)
            await asyncio.sleep(0)
            first = ten.queue.get_nowait()
            assert ten.queue.qsize() == QUEUE_LINES - 1
            assert first.message == "npu10 line 5"
            rest = [ten.queue.get_nowait() for _ in range(QUEUE_LINES - 1)]
            assert rest[-1].message == f"npu10 line {QUEUE_LINES + 4}"
            assert sum(r.dropped for r in [first, *rest]) == 5
        finally:
            log.setLevel(old)
            hub.detach()

    asyncio.run(run())
