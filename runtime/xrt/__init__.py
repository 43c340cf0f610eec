"""xrt: the NPU inference runtime (modelled on the Icraft XRT manual).

The data model lives in the submodules and is re-exported here:

- `xrt.memptr`: `MemPtr`, `PtrKind`;
- `xrt.memory`: `MemRegion` (with its transport hooks), `MemChunk`, `MemManager`,
  `HostMemRegion`;
- `xrt.registers`: `RegRegion`, register ops (`RegRead`, `RegWrite`, `RegMaskedWrite`,
  `RegPoll`), `RegBatch` and named access (`RegisterFile`, `RegisterView`, `FieldView`);
- `xrt.device`: `Device`, `DeviceURL`, `HostDevice`, `register_device`;
- `xrt.tensor`: `Tensor`, `HwLayout`, `ChannelTiled`;
- `xrt.dtypes`, `xrt.errors`: `DataType`, `QuantParams`, `TensorType`, `XrtError`, `ErrorCode`;
- `xrt.devices`: the NPU device classes `NpuDevice`, `BuyiDevice`, `Zg330Device` and the
  ``grpc://`` (emulator) and ``axi://`` (board) URL schemes, over `xrt.transport`
  (`NpuTransport`; gRPC is imported only when a ``grpc://`` URL is opened).

``docs/api-mapping.md`` maps the manual's names to these.
"""

from xrt.device import Device, DeviceURL, HostDevice, register_device, registered_devices
from xrt.devices import BuyiDevice, DmaMemRegion, NpuDevice, Zg330Device
from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.memory import HostMemRegion, MemChunk, MemManager, MemRegion
from xrt.memptr import MemPtr, PtrKind
from xrt.registers import (
    FieldView,
    RegBatch,
    RegisterFile,
    RegisterView,
    RegMaskedWrite,
    RegPoll,
    RegRead,
    RegRegion,
    RegWrite,
)
from xrt.tensor import ChannelTiled, HwLayout, Tensor
from xrt.transport import NpuTransport

__all__ = [
    "BuyiDevice",
    "ChannelTiled",
    "DataType",
    "Device",
    "DeviceURL",
    "DmaMemRegion",
    "ErrorCode",
    "FieldView",
    "HostDevice",
    "HostMemRegion",
    "HwLayout",
    "MemChunk",
    "MemManager",
    "MemPtr",
    "MemRegion",
    "NpuDevice",
    "NpuTransport",
    "PtrKind",
    "QuantParams",
    "RegBatch",
    "RegMaskedWrite",
    "RegPoll",
    "RegRead",
    "RegRegion",
    "RegWrite",
    "RegisterFile",
    "RegisterView",
    "Tensor",
    "TensorType",
    "XrtError",
    "Zg330Device",
    "register_device",
    "registered_devices",
]
