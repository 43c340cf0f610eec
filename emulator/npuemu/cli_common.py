"""What the device commands of ``npu-emu`` share: their errors, the device or observer they
open from ``--device URL`` (`xrt.cli_device`), and printing a result as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xrt.npu_device.npu import NpuDevice
    from xrt.transport.grpc import Observer

__all__ = ["CliError", "add_json_option", "emit", "observed", "open_device", "open_observer"]


class CliError(Exception):
    """A bad name or value: printed as one line (or the JSON error), exit status 2."""


def add_json_option(p: argparse.ArgumentParser, what: str = "the result") -> None:
    """``--json``: `what` as one JSON document on stdout, and an error as
    ``{"error": {...}}`` (`xrt.cli_output`)."""
    p.add_argument("--json", action="store_true", help=f"print {what} as one JSON document")


def emit(args: argparse.Namespace, doc: dict[str, Any], lines: Sequence[str]) -> None:
    """Print `doc` as JSON under ``--json``, else `lines`."""
    if getattr(args, "json", False):
        print(json.dumps(doc, indent=1, default=str))
        return
    for line in lines:
        print(line)


@contextmanager
def open_device(url: str) -> Iterator[NpuDevice]:
    """The device at `url`, leased while the block runs."""
    from xrt.device import Device

    dev = Device.open(url)
    try:
        yield dev  # type: ignore[misc]
    finally:
        dev.close()


def open_observer(url: str) -> Observer:
    """An observer of the device at `url` (no lease: `xrt.transport.grpc.Observer`)."""
    from xrt.transport.grpc import Observer

    return Observer(url)


def observed(obs: Observer) -> None:
    """One line on stderr: whose device was looked at, and that no lease was taken."""
    holder = obs.holder or "nobody"
    print(f"npu-emu: observed {obs.device} (held by {holder}; no lease taken)", file=sys.stderr)
