"""Shared setup of the session tests: the network tests' helpers are importable from here."""

from __future__ import annotations

import sys
from pathlib import Path

# netutil (onnxruntime helpers, tolerances) and onnx_zoo (composite models) live with the
# network tests; the session tests reuse them rather than copy them.
_NETWORK_TESTS = str(Path(__file__).resolve().parent.parent / "network")
if _NETWORK_TESTS not in sys.path:
    sys.path.insert(0, _NETWORK_TESTS)
