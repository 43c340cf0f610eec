"""The Qualcomm AIC100 runtime's API in Python names, over xrt sessions (docs/aic.md,
docs/api-mapping.md).

* `Qpc`: a program container (``xrt compile``) read from a file or bytes: `Qpc.info`,
  `Qpc.buffer_mappings`, `Qpc.buffer_mappings_dma`, `Qpc.io_descriptor`, `Qpc.network`,
  `Qpc.create_session`; `QpcFile`: a base path and a file name, loaded.
* `QpcInfo`: what a container holds (target, hardware, programs, placement, buffers,
  constants: `QpcConstantsInfo`).
* `BufferMapping`: one input or output buffer (name, index, direction, size, type, shape,
  whether a partial buffer is allowed).
* `Context`: the devices (URLs or opened devices), log level and callbacks, error handler,
  device log capture.
* `InferenceSet`: inferences of one `Qpc` across many devices, with the seed's
  `InferenceHandle` life cycle.
* `ProfilingHandle` / `StreamProfilingHandle`: per-sample and periodic reports.
"""

from xrt.aic.context import Context, LogLevel
from xrt.aic.handles import (
    HandleState,
    InferenceHandle,
    InferenceSample,
    InferenceSetProperties,
)
from xrt.aic.inference_set import InferenceSet
from xrt.aic.profiling import (
    ProfilingHandle,
    ProfilingReport,
    ProfilingType,
    StreamProfilingHandle,
)
from xrt.aic.qpc import BufferMapping, Qpc, QpcConstantsInfo, QpcFile, QpcInfo

__all__ = [
    "BufferMapping",
    "Context",
    "HandleState",
    "InferenceHandle",
    "InferenceSample",
    "InferenceSet",
    "InferenceSetProperties",
    "LogLevel",
    "ProfilingHandle",
    "ProfilingReport",
    "ProfilingType",
    "Qpc",
    "QpcConstantsInfo",
    "QpcFile",
    "QpcInfo",
    "StreamProfilingHandle",
]
