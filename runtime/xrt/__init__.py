"""xrt: the NPU inference runtime (modelled on the Icraft XRT manual).

The data model (MemPtr, MemRegion, RegRegion, MemChunk, Device, Tensor) lives in the
submodules; this package re-exports the public names as they are built.
"""

from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError

__all__ = ["DataType", "ErrorCode", "QuantParams", "TensorType", "XrtError"]
