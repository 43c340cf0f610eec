"""Test support shipped with the runtime, so every transport is held to the same contract.

- `xrt.testing.contracts`: transport-independent contract checks for `MemRegion`,
  `RegRegion` and `Device` (plain functions taking a factory).
- `xrt.testing.memory_transport`: an in-memory transport (and the ``mem://`` device) that
  the runtime's own tests use.

The runtime never imports this package.
"""

__all__: list[str] = []
