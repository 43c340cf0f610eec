"""The switches of an NPU backend that the manual names, and what each means on this NPU.

- **OCM optimisation** (manual, "保存ocm上的数据": "if OCM optimisation is on, the
  intermediates kept in the OCM can be dumped"): `ocm_optimize`. On (ZG330's default) the
  memory planner packs a program's intermediates into the on-chip memory first and the
  loader places code, constants and buffers there while it has room; off, everything lives
  in ``plddr`` as on Buyi. Buyi has no OCM: it cannot be turned on there.
- **MMU mode** (manual 1.1.3: with a snapshot, the MMU mode, merging and memory options are
  the snapshot's): `mmu_mode`. An MMU lets a program compiled once address whatever
  buffers a run gives it. This NPU has no MMU; its programs address memory only as a base
  register plus a 32-bit offset, and the driver sets the base registers per launch, which
  is what MMU mode gives. So it is always on: turning it off would need absolute
  addresses, which a 32-bit offset cannot hold (``plddr`` starts at 0x1_0000_0000).

Both are options a snapshot records and a session made from it takes (`restore`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from xrt.errors import ErrorCode, XrtError

__all__ = ["NpuSwitches"]


class NpuSwitches:
    """`ocm_optimize` and `mmu_mode` (see the module docstring); a base of `NpuBackend`."""

    OCM_REGION: ClassVar[str | None] = None
    _ocm_optimize: bool

    @property
    def ocm_optimize(self) -> bool:
        """Keep intermediates (and, while there is room, code and buffers) in the on-chip
        memory. Set before ``apply``; ZG330 only (default on)."""
        return self._ocm_optimize

    @ocm_optimize.setter
    def ocm_optimize(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise XrtError(ErrorCode.WRONG_TYPE, f"ocm_optimize must be a bool, got {on!r}")
        if on and self.OCM_REGION is None:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{type(self).__name__} has no on-chip memory to optimise for (ZG330 has: "
                "the manual's OCM optimisation is a ZG330 feature)",
            )
        self._ocm_optimize = on

    @property
    def ocm_region(self) -> str | None:
        """The on-chip memory programs use: ``ocm`` with `ocm_optimize` on, else None."""
        return self.OCM_REGION if self._ocm_optimize else None

    @property
    def mmu_mode(self) -> bool:
        """Always True: programs address memory through base registers set per launch."""
        return True

    @mmu_mode.setter
    def mmu_mode(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise XrtError(ErrorCode.WRONG_TYPE, f"mmu_mode must be a bool, got {on!r}")
        if not on:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                "mmu_mode cannot be turned off on this NPU: it has no MMU, and its programs "
                "address memory only as a base register plus a 32-bit offset, set per launch "
                "(what MMU mode gives); without them an address would have to fit the 32-bit "
                "offset, and plddr starts at 0x100000000",
            )

    def switch_options(self) -> dict[str, Any]:
        """The switches as a snapshot records them."""
        return {"ocm_optimize": self._ocm_optimize, "mmu_mode": True}

    def restore_switches(self, options: Mapping[str, Any]) -> None:
        """Take a snapshot's switches (manual 1.1.3: the snapshot's, whatever this backend
        was set to). Snapshots from before the switches existed: ZG330's OCM was on.

        Raises:
            XrtError: 11011 for switches this backend cannot take.
        """
        ocm = options.get("ocm_optimize", self.OCM_REGION is not None)
        mmu = options.get("mmu_mode", True)
        if not isinstance(ocm, bool) or mmu is not True or (ocm and self.OCM_REGION is None):
            raise XrtError(
                ErrorCode.LOAD_FAILED,
                f"snapshot options ocm_optimize={ocm!r}, mmu_mode={mmu!r} are not ones "
                f"{type(self).__name__} runs with",
            )
        self._ocm_optimize = ocm
