"""Sessions: a network bound to backends, its memory plan, and running it.

* `Session`: ``Session.create([BackendA, BackendB], network, [dev_a, dev_b])``, ``apply()``,
  ``forward(inputs)``, ``step_to(op_id, inputs)``, logging, dumps, callbacks, time profile;
  `SessionRun`: ``forward(inputs, block_until_done=False)``, a run that goes on meanwhile.
* `plan_memory` / `MemoryPlan`: liveness-based offsets in one arena (greedy by size).
* `OpTime`: one unit's wall / memory / hardware / other time; `op_type_summary` folds them
  per op type.
* `PlacementReport` (``Session.placement()``): operators per backend, and why the quantized
  ones on the host are not on the NPU.

docs/session.md describes the whole; docs/api-mapping.md maps the manual's names.
"""

from xrt.session._io_checks import InputLike
from xrt.session._run import SessionRun
from xrt.session._session import Callback, Session
from xrt.session._units import Unit
from xrt.session.placement import OpPlacement, PlacementReport, placement_report
from xrt.session.planner import DEFAULT_ALIGNMENT, Lifetime, MemoryPlan, Placement, plan_memory
from xrt.session.profile import (
    OpTime,
    OpTypeTime,
    format_op_type_summary,
    format_profile_table,
    op_type_summary,
)

__all__ = [
    "DEFAULT_ALIGNMENT",
    "Callback",
    "InputLike",
    "Lifetime",
    "MemoryPlan",
    "OpPlacement",
    "OpTime",
    "OpTypeTime",
    "Placement",
    "PlacementReport",
    "Session",
    "SessionRun",
    "Unit",
    "format_op_type_summary",
    "format_profile_table",
    "op_type_summary",
    "placement_report",
    "plan_memory",
]
