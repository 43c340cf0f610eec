"""Values the manual reads with a call and we read as attributes.

The Icraft manual writes accessors as C++ methods (``ptr.addr()``, ``tensor.offset()``,
``tensor.chunk()``, ``region.device()``); PEP 8 Python reads them as attributes
(``ptr.addr``). One name cannot be both a property and a method, so the attribute's value
answers the call itself: an address or offset is an `AccessorInt` (an ``int`` whose call
gives the plain ``int``), and a chunk or device returns itself when called
(`SelfAccessor`). Both spellings give the same value; nothing is computed twice.
"""

from __future__ import annotations

from typing import Self

__all__ = ["AccessorInt", "SelfAccessor"]


class AccessorInt(int):
    """An ``int`` that the manual's accessor call turns into a plain ``int``.

    ``ptr.addr == ptr.addr() == 0x1000``; arithmetic, hashing, formatting and numpy treat
    it as the ``int`` it is.
    """

    __slots__ = ()

    def __call__(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        return int.__repr__(self)


class SelfAccessor:
    """A mixin: calling the object returns it (the manual's ``tensor.chunk()``)."""

    __slots__ = ()

    def __call__(self) -> Self:
        return self
