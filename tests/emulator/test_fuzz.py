"""Structure-aware fuzzing of every DeviceService RPC against a real server (fixed seed,
bounded count; `bench/fuzz_server.py` runs a longer one): no crash, no hang, the server
keeps serving, and the bystander's device (npu1) is untouched."""

from __future__ import annotations

import pytest
from rpc_client import connect
from rpc_fuzz import RpcFuzzer, prepare_b

from npuemu.server.launch import ServerProcess
from xrt.hw.wire import pb

pytestmark = pytest.mark.sim

SEED, COUNT = 8, 300


def test_fuzzed_requests_crash_nothing_and_touch_no_other_device():
    with ServerProcess.start(devices=2, watchdog_s=10.0) as srv:
        a, b = connect(srv), connect(srv)
        a.open(device="npu0", client="fuzz-a")
        prepare_b(b)
        fuzz = RpcFuzzer(a, b, SEED)
        rep = fuzz.run(COUNT)
        assert rep.crashes == [], rep.statuses
        assert rep.hangs == [], rep.statuses
        assert not fuzz.other_device_changed(), "the fuzzed client changed npu1"
        assert rep.accepted_valid_lease > COUNT // 10, rep.statuses  # the fuzz reached devices
        assert len(a.stub.ListDevices(pb.ListDevicesRequest()).devices) == 2
        a.close()
        b.close()
    assert "Traceback" not in srv.log
