"""Observability of a running server: Prometheus ``/metrics`` (``serve --metrics-port``) and
JSON log lines (``--log-format json``), read from a real server as an operator's scraper and
log collector would."""

from __future__ import annotations

import json
import logging
import re
import sys
import urllib.request
from collections.abc import Iterator

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rpc_client import NPU_BASE, connect, dma_ops

from npuemu.server.json_log import JsonLogFormatter
from npuemu.server.launch import ServerProcess
from npuemu.server.metrics import lease_end_kind

pytestmark = pytest.mark.sim

_METRICS_LINE = re.compile(r"npu-emu: metrics on (http://\S+/metrics)")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess.start(
        devices=2, extra_args=("--metrics-port", "0", "--log-format", "json")
    ) as srv:
        yield srv


def _scrape(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, by name and labels."""
    m = _METRICS_LINE.search(server.log)
    assert m, server.log[-2000:]
    with urllib.request.urlopen(m.group(1), timeout=30) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_devices_leases_requests_and_cycles(server: ServerProcess) -> None:
    before = _scrape(server)
    assert _value(before, "npuemu_devices", target="buyi", state="free") == 2
    assert _value(before, "npuemu_leases_held") == 0
    built = [k for k in before if k[0] == "npuemu_model_build_seconds"]
    assert len(built) == 1 and built[0][1][0][1].startswith("buyi-")

    client, other = connect(server), connect(server)
    try:
        client.open(device="npu0")
        assert client.read(NPU_BASE) == 0x4E50_5530
        client.batch(*dma_ops(0x1000_0000, 0x1000_1000, 256))
        with pytest.raises(grpc.RpcError) as refused:
            other.open(device="npu0")  # held: a refusal, the clients' queue
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.RpcError):
            other.open(device="npu7")  # no such device: NOT_FOUND
        during = _scrape(server)
        assert _value(during, "npuemu_leases_held") == 1
        assert _value(during, "npuemu_devices", target="buyi", state="leased") == 1
        assert _value(during, "npuemu_opens_refused_total", reason="device-busy") == 1
        assert _value(during, "npuemu_device_register_operations_total", device="npu0") >= 2
        assert _value(during, "npuemu_device_simulated_cycle", device="npu0") > 0
        assert _value(during, "npuemu_requests_total", method="OpenDevice", code="OK") == 1
        assert (
            _value(during, "npuemu_requests_total", method="OpenDevice", code="FAILED_PRECONDITION")
            == 1
        )
        assert _value(during, "npuemu_requests_total", method="OpenDevice", code="NOT_FOUND") == 1
        assert _value(during, "npuemu_requests_total", method="ReadRegister", code="OK") == 1
        assert _value(during, "npuemu_request_seconds_count", method="RegisterBatch") == 1
    finally:
        client.close()
        client.channel.close()
        other.channel.close()
    after = _scrape(server)
    assert _value(after, "npuemu_leases_opened_total") == 1
    assert _value(after, "npuemu_lease_ends_total", reason="closed") == 1
    assert _value(after, "npuemu_lease_seconds_count") == 1
    assert _value(after, "npuemu_leases_held") == 0
    assert _value(after, "npuemu_worker_restarts_total", device="npu0") == 0


def test_json_log_lines_parse_and_carry_the_server_story() -> None:
    with ServerProcess.start(extra_args=("--log-format", "json")) as srv:
        pass  # started and stopped: the log holds the whole life
    records = [json.loads(line) for line in srv.log.splitlines() if line.startswith("{")]
    messages = [r["message"] for r in records]
    assert any(m.startswith("verilated model for buyi") for m in messages)
    assert messages[-1] == "stopped"
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert all(r["time"].endswith("+00:00") for r in records)
    # No line in the text form: a collector would choke on it.
    assert not re.search(r"^\d{4}-\d\d-\d\d .* (INFO|WARNING|ERROR) npuemu", srv.log, re.M)


def test_json_log_formatter_keeps_a_traceback_on_one_line() -> None:
    try:
        raise ValueError("bad value 7\nsecond line")
    except ValueError:
        record = logging.LogRecord(
            "npuemu.server", logging.ERROR, "f", 1, "failed: %s", ("x",), sys.exc_info()
        )
    line = JsonLogFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "failed: x" and entry["level"] == "ERROR"
    assert "ValueError: bad value 7" in entry["exception"]


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("closed by its holder", "closed"),
        ("client disconnected", "disconnected"),
        ("no keep-alive for 30 s", "expired"),
        ("no heartbeat for 2 s", "expired"),
        ("never used in the 10 s after it was granted", "expired"),
        ("the server shut down", "other"),
    ],
)
def test_lease_end_reasons_become_a_bounded_label(reason: str, kind: str) -> None:
    assert lease_end_kind(reason) == kind
