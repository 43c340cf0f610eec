"""The Icraft XRT manual's names beside ours, from one table.

The manual (C++ and Python) spells the runtime ``Session::CreateByOrder``, ``stepTo``,
``HostDevice::Default``, ``isNull``...; ours are PEP 8 (``create_by_order``, ``step_to``,
``HostDevice.default``, ``is_null``). `NAMES` lists them all, one `ManualName` per name,
grouped in `SECTIONS` (the tables of docs/api-mapping.md, generated from them):

* the class aliases are installed when `xrt` is imported (`install_aliases`), so
  ``sess.stepTo(3)`` is ``sess.step_to(3)``: the same function, no second implementation;
* the manual's modules, ``xir``, ``host_backend``, ``buyi_backend`` and ``zg330_backend``,
  are thin faces filled from the table (`module_face`), and ``from xrt import *`` exports
  the names the manual's examples use;
* `generate_network` is the manual's example network (``xir.generate_network``,
  ``xir.GenerateNetwork``).

A name of the manual that has no alias (a property the manual calls as a method under the
same name, a C++ macro) is a `Kind.DIFFERS` row saying what to write instead.
tests/runtime/test_manual_names.py fails when a row does not resolve or when the manual
uses a name the table lacks.
"""

from __future__ import annotations

from xrt.manual.rows_data import DEVICES, MEMORY, POINTERS, REGISTERS, TENSORS
from xrt.manual.rows_session import BACKENDS, MODULES, NETWORKS, SESSIONS
from xrt.manual.table import Kind, ManualName, Section, install_aliases, module_face, resolve

__all__ = [
    "NAMES",
    "SECTIONS",
    "Kind",
    "ManualName",
    "Section",
    "install_aliases",
    "module_face",
    "resolve",
]

SECTIONS: tuple[Section, ...] = (
    POINTERS,
    MEMORY,
    REGISTERS,
    DEVICES,
    TENSORS,
    NETWORKS,
    BACKENDS,
    SESSIONS,
    MODULES,
)
"""The tables, in the order docs/api-mapping.md shows them."""

NAMES: tuple[ManualName, ...] = tuple(row for section in SECTIONS for row in section.rows)
"""Every row."""
