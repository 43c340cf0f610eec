"""The operators a backend's `view` selects (`select_ops`); a network view from what the
caller gives is `xrt.network.as_view`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xrt.errors import ErrorCode, XrtError

__all__ = ["select_ops"]


def select_ops(
    name: str, mine: Sequence[int], ids: int | Sequence[int], end: int | None
) -> list[int]:
    """The op ids a backend's ``view(ids, end)`` selects among its own (`mine`):
    ``view([3, 5])`` exactly these, ``view(start, end)`` those with ``start <= id < end``,
    ``view(start)`` those from `start` on.

    Raises:
        XrtError: 11003 for ids that are not the backend's or an empty selection; 11010
            for wrong types.
    """
    if isinstance(ids, bool) or not isinstance(ids, int | np.integer | Sequence):
        raise XrtError(ErrorCode.WRONG_TYPE, f"view takes op ids, got {ids!r}")
    if isinstance(ids, int | np.integer):
        start = int(ids)
        if end is not None and (isinstance(end, bool) or not isinstance(end, int)):
            raise XrtError(ErrorCode.WRONG_TYPE, f"view end must be an int, got {end!r}")
        if start not in mine:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"{name}.view: op {start} is not bound here (ops {mine})"
            )
        chosen = [i for i in mine if i >= start and (end is None or i < end)]
        if not chosen:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"view({start}, {end}) selects no op")
        return chosen
    if end is not None:
        raise XrtError(ErrorCode.WRONG_TYPE, "view(list) takes no end id")
    chosen = []
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int | np.integer):
            raise XrtError(ErrorCode.WRONG_TYPE, f"op ids must be ints, got {i!r}")
        if int(i) not in mine:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"{name}.view: op {int(i)} is not bound here (ops {mine})"
            )
        chosen.append(int(i))
    return chosen
