"""Mutation check of the RTL: deliberate bugs in the compute engine and the DMA, each run
against a focused test selection that must catch it.

`make mutation` runs ``python -m tools.mutation`` (``__main__``); the mutants live in
``mutants.toml``; docs/verification.md ("Mutation check") explains the run and its figures.
"""

from tools.mutation.mutants import Mutant, MutantFileError, apply_mutant, load_mutants

__all__ = ["Mutant", "MutantFileError", "apply_mutant", "load_mutants"]
