"""The installed runtime's version: one function, for whoever reports it (`Device.version`,
tuning records, ``xrt --version``)."""

from __future__ import annotations

from functools import lru_cache

__all__ = ["runtime_version"]


@lru_cache(maxsize=1)
def runtime_version() -> str:
    """The installed runtime's version (the ``npu-emu`` distribution), or ``0+unknown``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("npu-emu")
    except PackageNotFoundError:
        return "0+unknown"
