"""`Framework`: which framework a network came from (Icraft's ``xir::Framework``).

A label, recorded on the network (`Network.framework`, `Network.framework_version`).
ONNX is the one front end here: `import_onnx` records ``Framework.ONNX`` and the model's
opset. The other members name frameworks Icraft's compiler takes; a network built by hand
may carry one (`xrt.manual.generate_network` records the one it is given) but nothing here
reads their models. The label is not stored in network files (docs/network-format.md):
a loaded network has none.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Framework"]


class Framework(Enum):
    """A network's source framework, in the order of Icraft's ``xir::Framework``."""

    PYTORCH = "PyTorch"
    CAFFE = "Caffe"
    TENSORFLOW = "TensorFlow"
    DARKNET = "Darknet"
    ONNX = "ONNX"
