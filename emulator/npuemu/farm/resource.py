"""The labgrid resource of one emulated NPU, and the driver that opens it through xrt.

Exported by ``npu-emu-farm export`` (one per device of a server); a place matches it as
``EXPORTER/DEVICE/NpuEmuDevice``. In an environment file::

    targets:
      main:
        resources:
          RemotePlace: {name: "+"}      # the place reserved under LG_TOKEN
        drivers:
          NpuEmuDriver: {}
    imports:
      - npuemu.farm.resource

``target.get_driver("NpuEmuDriver").device`` is then the opened `xrt` device. The server's
token comes from ``$NPU_EMU_TOKEN`` in the job's environment: resource parameters are
visible to every farm user, so a token never goes there.
"""

from __future__ import annotations

from typing import Any

import attr
from labgrid.driver.common import Driver
from labgrid.factory import target_factory
from labgrid.resource.common import Resource
from labgrid.step import step

from xrt.farm import RESOURCE_CLASS

__all__ = ["NpuEmuDevice", "NpuEmuDriver"]

assert RESOURCE_CLASS == "NpuEmuDevice"


@target_factory.reg_resource
@attr.s(eq=False)
class NpuEmuDevice(Resource):
    """One emulated NPU of an ``npu-emu serve`` server.

    Args:
        address: Host the server listens on (as clients reach it).
        port: Its gRPC port.
        device: Device name on the server (``npu0``).
        npu_target: ``buyi`` or ``zg330``.
    """

    address: str = attr.ib(validator=attr.validators.instance_of(str))
    port: int = attr.ib(converter=int)
    device: str = attr.ib(validator=attr.validators.instance_of(str))
    # not `target`: labgrid's bindings already use that name for the labgrid Target
    npu_target: str = attr.ib(default="", validator=attr.validators.instance_of(str))

    @property
    def grpc_url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"grpc://{host}:{self.port}/{self.device}"


@target_factory.reg_driver
@attr.s(eq=False)
class NpuEmuDriver(Driver):
    """Opens the bound `NpuEmuDevice` as an xrt device while the driver is active.

    Args:
        params: Extra ``grpc://`` URL parameters (``"bounce=4194304&local=0"``); never a
            token (``$NPU_EMU_TOKEN`` supplies it).
    """

    bindings = {"npu": "NpuEmuDevice"}  # noqa: RUF012 - labgrid reads a class attribute
    params: str = attr.ib(default="", validator=attr.validators.instance_of(str))

    def __attrs_post_init__(self) -> None:
        if "token=" in self.params:  # before binding: refuse it whatever the target has
            raise ValueError("NpuEmuDriver params must not carry a token: set NPU_EMU_TOKEN")
        super().__attrs_post_init__()
        self._device: Any = None

    @property
    def device(self) -> Any:
        """The opened `xrt` device (an `NpuDevice`); activates the driver if needed."""
        if not self._device:
            self.target.activate(self)
        return self._device

    @step()
    def on_activate(self) -> None:
        import xrt

        if not self.npu.avail:
            raise RuntimeError(
                f"{self.npu.grpc_url} is unavailable (its server is not serving, or the device "
                "is leased outside the farm)"
            )
        url = self.npu.grpc_url + (f"?{self.params}" if self.params else "")
        self._device = xrt.Device.open(url)

    @step()
    def on_deactivate(self) -> None:
        device, self._device = self._device, None
        if device is not None:
            device.close()
