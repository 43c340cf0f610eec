"""The Qualcomm AIC100 runtime's API in Python names, on xrt (docs/aic.md).

`Context` (devices, log and error callbacks, device log capture), `InferenceSet` with its
`InferenceHandle` life cycle across many devices, and `ProfilingHandle` /
`StreamProfilingHandle`.
"""

from xrt.aic.context import Context, LogLevel
from xrt.aic.inference_set import (
    HandleState,
    InferenceHandle,
    InferenceSample,
    InferenceSet,
    InferenceSetProperties,
)
from xrt.aic.profiling import (
    ProfilingHandle,
    ProfilingReport,
    ProfilingType,
    StreamProfilingHandle,
)

__all__ = [
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
    "StreamProfilingHandle",
]
