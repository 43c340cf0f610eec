"""Memory: regions, their chunks and their memory managers (the manual's ``MemRegion``,
``HostMemRegion``, ``MemChunk`` and ``MemManager``).

- `xrt.memory.regions`: `MemRegion`, a named range of device memory whose public methods
  check every argument and then call a transport's hooks (the hook table is there);
- `xrt.memory.host`: `HostMemRegion`, host memory the OS allocates;
- `xrt.memory.chunk`: `MemChunk`, the handle of an allocated block (made by `MemRegion.malloc`);
- `xrt.memory.managers`: `MemManager`, the allocator and books of a region's chunks, and its
  thread-safety rules.

The names are re-exported here (and from `xrt`), so ``from xrt.memory import MemRegion``
keeps working.
"""

# `Deleter` (a type alias) and the private view helpers (used by `xrt.tensor`) stay
# importable from here, where they lived when `xrt.memory` was one module.
from xrt.memory._views import _dest_view as _dest_view
from xrt.memory._views import _src_view as _src_view
from xrt.memory.chunk import Deleter as Deleter
from xrt.memory.chunk import MemChunk
from xrt.memory.host import HostMemRegion
from xrt.memory.managers import MemManager
from xrt.memory.regions import MemRegion

__all__ = ["HostMemRegion", "MemChunk", "MemManager", "MemRegion"]
