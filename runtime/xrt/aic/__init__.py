"""The Qualcomm AIC100 runtime's API in Python names, over xrt sessions (docs/api-mapping.md).

* `Qpc`: a program container (``xrt compile``) read from a file or bytes: `Qpc.info`,
  `Qpc.buffer_mappings`, `Qpc.network`, `Qpc.create_session`.
* `QpcInfo`: what a container holds (target, hardware, programs, placement, buffers).
* `BufferMapping`: one input or output buffer (name, index, direction, size, type, shape).
"""

from xrt.aic.qpc import BufferMapping, Qpc, QpcInfo

__all__ = ["BufferMapping", "Qpc", "QpcInfo"]
