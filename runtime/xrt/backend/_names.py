"""Backend classes by name, for whoever picks backends from text (``xrt run --backends
buyi,host``): `register_backend_type` on the class, `get_backend_type` to find it again;
and `create_backend`, a bound backend from its class given as a value (the manual's
``Backend.Create(HostBackend, view, device)``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from xrt.backend._base import Backend
from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkView

__all__ = ["backend_types", "create_backend", "get_backend_type", "register_backend_type"]

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


def create_backend(
    backend_type: type[B],
    network_view: Network | NetworkView | None = None,
    device: Device | None = None,
) -> B:
    """``backend_type.create(network_view, device)``, the backend class given first as the
    manual's Python spells it: ``Backend.Create(HostBackend, view, device)``.

    Raises:
        XrtError: 11010 naming `backend_type` when it is not a Backend subclass (the class
            is missing: ``HostBackend.Create(view)``) or when no view is given; as `init`.
    """
    if not (isinstance(backend_type, type) and issubclass(backend_type, Backend)):
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"Backend.Create (create_backend) takes the backend class first "
            f"(Backend.Create(HostBackend, view, device)), got {backend_type!r}",
        )
    if network_view is None:
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"Backend.Create({backend_type.__name__}) needs a view"
        )
    return backend_type.create(network_view, device)
