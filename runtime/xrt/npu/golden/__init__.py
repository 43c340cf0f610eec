"""The golden model of the compute engine: executes programs and checks them.

* `run` executes a program instruction by instruction against numpy memories and buffers
  and reports errors, per-unit counts, MACs, bytes and the cost model's cycle estimate.
* `Memory` holds a target's memories; `Machine` the on-chip buffers.

Its semantics are docs/isa.md's; where that leaves a choice open, the choice is written in
``rtl/isa/npu_isa_guide.md`` ("What the golden model decides").
"""

from .cost import CostModel, CycleEstimate
from .executor import RunResult, run
from .machine import Machine, prm_word, requantize_exact
from .memory import BusFault, Memory
from .tokens import Queue

__all__ = [
    "BusFault",
    "CostModel",
    "CycleEstimate",
    "Machine",
    "Memory",
    "Queue",
    "RunResult",
    "prm_word",
    "requantize_exact",
    "run",
]
