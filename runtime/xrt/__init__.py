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
- `xrt.npu_device`: the NPU device classes `NpuDevice`, `BuyiDevice`, `ZG330Device` and the
  ``grpc://`` (emulator) and ``axi://`` (board) URL schemes, over `xrt.transport`
  (`NpuTransport`; gRPC is imported only when a ``grpc://`` URL is opened).

Running networks:

- `xrt.network`: `Network`, `NetworkView`, `NetworkBuilder`, `Operator` (ONNX import,
  the network file format, the reference executor);
- `xrt.quant`: `calibrate`, `quantize_network` (the integer arithmetic of
  docs/quantization.md);
- `xrt.backend`: `Backend`, `HostBackend`; `xrt.session`: `Session`.

The manual's own names (``Session.CreateByOrder``, ``sess.stepTo``, ``ptr.isNull()``...)
are aliases of ours, installed from one table at import (`xrt.manual`);
``docs/api-mapping.md``, generated from the same table, maps one to the other.
"""

from xrt.backend import Backend, HostBackend
from xrt.device import Device, DeviceURL, HostDevice, register_device, registered_devices
from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.memory import HostMemRegion, MemChunk, MemManager, MemRegion
from xrt.memptr import MemPtr, PtrKind
from xrt.network import Network, NetworkBuilder, NetworkView, Operator
from xrt.npu_device import BuyiDevice, DmaMemRegion, NpuDevice, ZG330Device
from xrt.quant import calibrate, quantize_network
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
from xrt.session import Session
from xrt.tensor import ChannelTiled, HwLayout, Tensor
from xrt.transport import NpuTransport

__all__ = [
    "Backend",
    "BuyiDevice",
    "ChannelTiled",
    "DataType",
    "Device",
    "DeviceURL",
    "DmaMemRegion",
    "ErrorCode",
    "FieldView",
    "HostBackend",
    "HostDevice",
    "HostMemRegion",
    "HwLayout",
    "MemChunk",
    "MemManager",
    "MemPtr",
    "MemRegion",
    "Network",
    "NetworkBuilder",
    "NetworkView",
    "NpuDevice",
    "NpuTransport",
    "Operator",
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
    "Session",
    "Tensor",
    "TensorType",
    "XrtError",
    "ZG330Device",
    "calibrate",
    "quantize_network",
    "register_device",
    "registered_devices",
]

# The manual's names (``stepTo``, ``HostDevice.Default``, ``PtrType``...): aliases of the
# objects above, from the one table in xrt.manual.
from xrt.manual import NAMES as _MANUAL_NAMES
from xrt.manual import install_aliases as _install_aliases

__all__ += [n for n in _install_aliases(_MANUAL_NAMES, globals()) if n not in __all__]
