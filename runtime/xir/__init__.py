"""``import xir``: the Icraft manual's intermediate representation, a thin face over `xrt`.

Networks (`Network`, `NetworkView`, `Operator`, `NetworkBuilder`), data types
(`TensorType`, `DataType` and the manual's `FloatType` / `IntegerType`, `Layout`,
`QuantParams`), `Framework`, and the manual's example network
(``generate_network(name, framework, version)``, ``GenerateNetwork()``). Every name is
an `xrt` object, bound from the manual-name table (`xrt.manual`); nothing here has logic
of its own.
"""

from xrt.manual import NAMES as _NAMES
from xrt.manual import module_face as _module_face

__all__ = _module_face("xir", _NAMES, globals())
