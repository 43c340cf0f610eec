"""Backend classes by name, for whoever picks backends from text (``xrt run --backends
buyi,host``): `register_backend_type` on the class, `get_backend_type` to find it again."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from xrt.backend._base import Backend
from xrt.errors import ErrorCode, XrtError

__all__ = ["backend_types", "get_backend_type", "register_backend_type"]

B = TypeVar("B", bound=Backend)

_BACKEND_TYPES: dict[str, type[Backend]] = {}


def register_backend_type(name: str) -> Callable[[type[B]], type[B]]:
    """Class decorator: make a backend class known by `name` (``xrt run --backends NAME``)."""
    if not isinstance(name, str) or not name:
        raise XrtError(ErrorCode.WRONG_TYPE, f"backend names are non-empty strings: {name!r}")

    def decorate(cls: type[B]) -> type[B]:
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise XrtError(ErrorCode.WRONG_TYPE, f"{cls!r} is not a Backend subclass")
        old = _BACKEND_TYPES.get(name)
        if old is not None and old is not cls:
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"backend name {name!r} is taken by {old.__name__}"
            )
        _BACKEND_TYPES[name] = cls
        return cls

    return decorate


def backend_types() -> dict[str, type[Backend]]:
    """Registered backend classes by name."""
    return dict(_BACKEND_TYPES)


def get_backend_type(name: str) -> type[Backend]:
    """The backend class registered as `name`; XrtError 11010 listing the names otherwise."""
    try:
        return _BACKEND_TYPES[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(_BACKEND_TYPES))
        raise XrtError(ErrorCode.WRONG_TYPE, f"unknown backend {name!r} (known: {known})") from None
