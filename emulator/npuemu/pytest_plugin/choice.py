"""Which device a test gets, and where its recording goes: the plugin's decisions, kept
apart from pytest's machinery so that each is one small function.

- `NpuMark`: what ``@pytest.mark.npu(target=..., fidelity=...)`` asks, checked.
- `device_url`: the URL a test opens, from the configured one (``--npu-device``,
  ``$XRT_DEVICE``, else the embedded ``sim://TARGET``) and the test's mark.
- `recording_name`: a test's recording file name, from its node id.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from xrt.device_url import DeviceURL, default_device_url
from xrt.errors import ErrorCode, XrtError
from xrt.hw.targets import TARGETS
from xrt.recording import SUFFIX

__all__ = [
    "FIDELITIES",
    "RECORDING_SCHEMES",
    "NpuMark",
    "device_url",
    "recording_name",
    "with_param",
]

FIDELITIES = ("cycle",)
"""The simulation tiers a test may ask for. Only the cycle-accurate RTL exists today; the
functional tier of docs/architecture.md ("Fidelity tiers") is not built yet."""

RECORDING_SCHEMES = ("sim", "grpc", "grpcs", "axi")
"""URL schemes whose devices take ``record=FILE`` (a client-side recording,
`xrt.transport.recorder`)."""


@dataclass(frozen=True)
class NpuMark:
    """What a test's ``@pytest.mark.npu(...)`` asks for (None: anything)."""

    target: str | None = None
    fidelity: str | None = None
    faults: tuple[str, ...] = ()  # armed on the test's device (the --fault spelling)

    @classmethod
    def from_kwargs(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NpuMark:
        """Check the mark's arguments.

        Raises:
            XrtError: 11010 naming a positional argument, an unknown keyword, a target
                that is not ``buyi`` or ``zg330``, or a fidelity tier that does not exist.
        """
        if args:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"@pytest.mark.npu takes keywords only (target=, fidelity=, faults=), not {args!r}",
            )
        unknown = sorted(set(kwargs) - {"target", "fidelity", "faults"})
        if unknown:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"@pytest.mark.npu: unknown keyword(s) {', '.join(unknown)} "
                "(known: target, fidelity, faults)",
            )
        target, fidelity = kwargs.get("target"), kwargs.get("fidelity")
        if target is not None and target not in TARGETS:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"@pytest.mark.npu(target={target!r}): no such NPU target "
                f"(known: {', '.join(sorted(TARGETS))})",
            )
        if fidelity is not None and fidelity not in FIDELITIES:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"@pytest.mark.npu(fidelity={fidelity!r}): no such simulation tier "
                f"(known: {', '.join(FIDELITIES)}; the functional tier is not built yet)",
            )
        faults = kwargs.get("faults", ())
        if isinstance(faults, str) or not isinstance(faults, (list, tuple)):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"@pytest.mark.npu(faults={faults!r}): a list of KIND[:ARG...][@TRIGGER] texts",
            )
        from xrt.npu_device.faults import parse_fault

        for spec in faults:
            if not isinstance(spec, str):
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"@pytest.mark.npu: fault {spec!r} is not text"
                )
            parse_fault(spec)  # 11003 naming what is wrong in it
        return cls(target, fidelity, tuple(faults))


def with_param(url: str, key: str, value: str) -> str:
    """`url` with ``key=value`` added to its query (`value` percent-encoded)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}{key}={quote(value, safe='/')}"


def device_url(configured: str | None, mark: NpuMark) -> str:
    """The URL a test opens: `configured` (``--npu-device``), else `default_device_url`
    (``$XRT_DEVICE``, else ``sim://TARGET`` of the mark, else ``sim://buyi``). A ``sim://``
    URL is given the mark's target (its parameters kept); any other URL names a device
    whose target the plugin checks once it is open.

    Raises:
        XrtError: 11003 for a URL that does not parse.
    """
    url = (configured or "").strip() or default_device_url(mark.target)
    parsed = DeviceURL.parse(url)
    if parsed.scheme == "sim" and mark.target is not None and parsed.host != mark.target:
        _, _, query = url.partition("?")
        url = f"sim://{mark.target}" + (f"?{query}" if query else "")
    return url


def recording_name(nodeid: str) -> str:
    """A file name for the recording of the test `nodeid`: readable, unique (a digest of the
    whole id), safe on any file system."""
    plain = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("._")[:80] or "test"
    digest = hashlib.sha256(nodeid.encode()).hexdigest()[:10]
    return f"{plain}-{digest}{SUFFIX}"
