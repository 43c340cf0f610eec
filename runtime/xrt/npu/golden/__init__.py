"""The golden model of the compute engine: executes programs and checks them.

* `run` executes a program instruction by instruction against numpy memories and buffers
  and reports errors, per-unit counts, MACs, bytes and the cost model's cycle estimate.
* `check` finds races, token errors and range errors without running the program.
* `generate_program` draws random race-free programs for RTL tests; `coverage` counts the
  field-value classes they hit; `error_cases` gives one program per way each error code
  arises, with the expected (code, pc, unit).
* `Memory` holds a target's memories; `Machine` the on-chip buffers.

Its semantics are docs/isa.md's; where that leaves a choice open, the choice is written in
``rtl/isa/npu_isa_guide.md`` ("What the golden model decides").
"""

from .checker import CheckReport, Finding, check
from .cost import CostModel, CycleEstimate
from .coverage import ALL_BINS, coverage
from .errorgen import ErrorCase, error_cases
from .executor import RunResult, run
from .generator import GeneratedProgram, generate_program, small_config
from .machine import Machine, prm_word, requantize_exact
from .memory import BusFault, Memory
from .tokens import Queue

__all__ = [
    "ALL_BINS",
    "BusFault",
    "CheckReport",
    "CostModel",
    "CycleEstimate",
    "ErrorCase",
    "Finding",
    "GeneratedProgram",
    "Machine",
    "Memory",
    "Queue",
    "RunResult",
    "check",
    "coverage",
    "error_cases",
    "generate_program",
    "prm_word",
    "requantize_exact",
    "run",
    "small_config",
]
