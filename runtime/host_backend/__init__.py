"""``from host_backend import *``: the Icraft manual's module of `HostBackend`, a thin face over
`xrt.backend` (names bound from the manual-name table, `xrt.manual`)."""

from xrt.manual import NAMES as _NAMES
from xrt.manual import module_face as _module_face

__all__ = _module_face("host_backend", _NAMES, globals())
