"""Fixtures for the server tests: a real `npu-emu serve` subprocess on a free loopback port."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import grpc
import pytest
from rpc_client import Client, connect

from npuemu.server.launch import ServerProcess


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """Two Buyi devices, short watchdog and lease TTL, for this module's tests."""
    with ServerProcess.start(devices=2, lease_ttl_s=2.0, watchdog_s=3.0) as srv:
        yield srv


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    c = connect(server)
    yield c
    with contextlib.suppress(grpc.RpcError):  # e.g. the worker the test killed is restarting
        c.close()
    c.channel.close()
