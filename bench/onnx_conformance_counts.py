"""How much of ONNX's own test data xrt passes: the node tests of every supported operator
(and of all node tests overall), the wheel's whole-model tests and its light networks.

Usage: .venv/bin/python bench/onnx_conformance_counts.py [--per-op]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "network"))

from onnx_node_cases import (  # noqa: E402
    FOLDED_OPS,
    WHEEL_MODEL_KINDS,
    node_cases,
    run_case,
    wheel_model_cases,
)

from xrt.network import SUPPORTED_ONNX_OPS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-op", action="store_true", help="print every op type's count")
    args = parser.parse_args()
    cases = node_cases()
    supported = set(SUPPORTED_ONNX_OPS) | set(FOLDED_OPS)
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for op, op_cases in cases.items():
        for case in op_cases:
            total[op] += 1
            if op in supported and run_case(case) is None:
                passed[op] += 1
    sup_total = sum(total[op] for op in supported)
    sup_pass = sum(passed[op] for op in supported)
    all_total = sum(total.values())
    print(
        f"node tests of the {len(supported)} supported op types "
        f"({sum(1 for op in supported if total[op])} have tests): "
        f"{sup_pass}/{sup_total} pass ({100 * sup_pass / sup_total:.1f} %)"
    )
    print(
        f"all single-node tests of onnx ({len(total)} op types): {sup_pass}/{all_total} pass "
        f"({100 * sup_pass / all_total:.1f} %)"
    )
    if args.per_op:
        for op in sorted(supported):
            if total[op]:
                print(f"  {op:<24}{passed[op]:>4}/{total[op]}")
    for kind in WHEEL_MODEL_KINDS:
        wc = wheel_model_cases(kind)
        ok = sum(run_case(c) is None for c in wc)
        print(f"wheel model tests {kind}: {ok}/{len(wc)} pass")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
