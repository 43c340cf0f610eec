"""``from zg330_backend import *``: the Icraft manual's module of `ZG330Backend`, a thin face over
`xrt.backend` (names bound from the manual-name table, `xrt.manual`)."""

from xrt.manual import NAMES as _NAMES
from xrt.manual import module_face as _module_face

__all__ = _module_face("zg330_backend", _NAMES, globals())
