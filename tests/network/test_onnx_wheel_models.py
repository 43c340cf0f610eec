"""The whole-model tests the onnx wheel ships with data files (PyTorch-converted layers and
operators at opset 6, and the "simple" models), run through HostBackend against their
stored outputs. Old opsets are upgraded by onnx.version_converter on the way in."""

from __future__ import annotations

import pytest
from onnx_node_cases import WHEEL_MODEL_KINDS, run_case, wheel_model_cases

STR = "STRING data: xrt has numeric tensors only"
VOLUMETRIC = "3-D (volumetric) convolution: only 1-D and 2-D are supported"
TRAINING = "ai.onnx.preview.training (Gradient) is not an inference operator"
SEQUENCES = "sequence types and operators are not supported"
SHRINK = "Shrink is not supported"

EXPECTED_FAILURES: dict[str, str] = {
    "test_Conv3d": VOLUMETRIC,
    "test_Conv3d_dilated": VOLUMETRIC,
    "test_Conv3d_dilated_strided": VOLUMETRIC,
    "test_Conv3d_groups": VOLUMETRIC,
    "test_Conv3d_no_bias": VOLUMETRIC,
    "test_Conv3d_stride": VOLUMETRIC,
    "test_Conv3d_stride_padding": VOLUMETRIC,
    "test_gradient_of_add": TRAINING,
    "test_gradient_of_add_and_mul": TRAINING,
    "test_sequence_model1": SEQUENCES,
    "test_sequence_model2": SEQUENCES,
    "test_sequence_model3": SEQUENCES,
    "test_sequence_model4": SEQUENCES,
    "test_sequence_model5": SEQUENCES,
    "test_sequence_model6": SEQUENCES,
    "test_sequence_model7": SEQUENCES,
    "test_sequence_model8": SEQUENCES,
    "test_shrink": SHRINK,
    "test_strnorm_model_monday_casesensintive_lower": STR,
    "test_strnorm_model_monday_casesensintive_nochangecase": STR,
    "test_strnorm_model_monday_casesensintive_upper": STR,
    "test_strnorm_model_monday_empty_output": STR,
    "test_strnorm_model_monday_insensintive_upper_twodim": STR,
    "test_strnorm_model_nostopwords_nochangecase": STR,
}
"""Test name -> why xrt does not pass it."""


@pytest.mark.parametrize("kind", WHEEL_MODEL_KINDS)
def test_onnx_wheel_models(kind: str) -> None:
    cases = wheel_model_cases(kind)
    assert cases
    problems = []
    for case in cases:
        why = run_case(case)
        if case.name in EXPECTED_FAILURES:
            if why is None:
                problems.append(f"{case.name}: passes now, drop it from EXPECTED_FAILURES")
        elif why is not None:
            problems.append(f"{case.name}: {why}")
    assert not problems, "\n".join(problems)
