"""The pytest plugin of npu-emu: simulated NPUs as fixtures (docs/testing.md).

Installed with the package (the ``pytest11`` entry point ``npu_emu``), so a project that
depends on ``npu-emu[emulator]`` has it in every pytest run; ``-p no:npu_emu`` turns it off.

Fixtures:

- ``npu_device``: an opened NPU device of the test's own: the embedded ``sim://TARGET``
  device (a private simulation worker), or a new lease of ``--npu-device URL`` /
  ``$XRT_DEVICE`` (``grpc://`` waits ``--npu-wait`` seconds for a free device, so
  pytest-xdist workers share a server's devices, one each at a time). Closed after the
  test. Its simulated cycles and NPU time become the test's properties ``npu_cycles`` and
  ``npu_time_us`` (JUnit XML). Its session is recorded client-side (``record=FILE``,
  `xrt.transport.recorder`) and the recording kept when the test fails, its path in the
  failure report (``--npu-keep-recordings``: every test's; ``--npu-no-recordings``: none).
- ``npu_session``: ``npu_session(network)`` makes an applied `xrt.Session` on that device.
- ``npu_server``: a real ``npu-emu serve`` on loopback for the session (per xdist worker).
- ``farm_device``: a device held from a labgrid farm (``--farm-tags``; docs/farm.md).

The marker ``@pytest.mark.npu(target="zg330", fidelity="cycle")`` selects the NPU; an
unknown target or tier fails the test with a message naming it; a remote device of another
target skips it.

`choice` holds the decisions (which URL, which file), `plugin` the hooks and fixtures.
"""

from __future__ import annotations

from npuemu.pytest_plugin.plugin import (
    farm_device,
    npu_device,
    npu_server,
    npu_session,
    pytest_addoption,
    pytest_configure,
    pytest_runtest_makereport,
    pytest_sessionfinish,
)

__all__ = [
    "farm_device",
    "npu_device",
    "npu_server",
    "npu_session",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
]
