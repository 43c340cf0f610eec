"""ONNX's backend node conformance tests for every operator the importer supports, run
through HostBackend as shipped: weights, shapes, pads, scales and bounds that the cases
feed as graph inputs are run-time parameters (see onnx_node_cases.py for how the cases are
generated and run).

Every case passes except those in EXPECTED_FAILURES, each with its reason
(tools/onnx_node_failures.toml, listed in docs/onnx-operators.md); an expected failure
that starts passing fails the test too, so the list stays exact.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from onnx_node_cases import FOLDED_OPS, node_cases, run_case

from xrt.network import SUPPORTED_ONNX_OPS

FAILURES_FILE = Path(__file__).resolve().parents[2] / "tools" / "onnx_node_failures.toml"


def _expected_failures() -> dict[str, str]:
    doc = tomllib.loads(FAILURES_FILE.read_text())
    return {case: doc["reasons"][key] for case, key in doc["cases"].items()}


EXPECTED_FAILURES = _expected_failures()
"""Case name -> why xrt does not pass it (tools/onnx_node_failures.toml, which
docs/onnx-operators.md lists too)."""


def test_every_failure_has_a_stated_reason() -> None:
    doc = tomllib.loads(FAILURES_FILE.read_text())
    assert set(doc["cases"].values()) <= set(doc["reasons"])
    assert set(doc["reasons"]) <= set(doc["cases"].values()), "a reason no case has"


def test_every_expected_failure_names_a_known_case() -> None:
    known = {c.name for cases in node_cases().values() for c in cases}
    assert not sorted(set(EXPECTED_FAILURES) - known)


@pytest.mark.parametrize("op_type", SUPPORTED_ONNX_OPS + FOLDED_OPS)
def test_onnx_node_cases(op_type: str) -> None:
    cases = node_cases().get(op_type, [])
    problems = []
    for case in cases:
        why = run_case(case)
        if case.name in EXPECTED_FAILURES:
            if why is None:
                problems.append(f"{case.name}: passes now, drop it from EXPECTED_FAILURES")
        elif why is not None:
            problems.append(f"{case.name}: {why}")
    assert not problems, "\n".join(problems)
