"""ONNX's backend node conformance tests for every operator the importer supports, run
through HostBackend as shipped: weights, shapes, pads, scales and bounds that the cases
feed as graph inputs are run-time parameters (see onnx_node_cases.py for how the cases are
generated and run).

Every case passes except those in EXPECTED_FAILURES, each with its reason; an expected
failure that starts passing fails the test too, so the list stays exact.
"""

from __future__ import annotations

import pytest
from onnx_node_cases import FOLDED_OPS, node_cases, run_case

from xrt.network import SUPPORTED_ONNX_OPS

FP64 = "float64 (DOUBLE) data: xrt has no FP64 element type"
U64 = "UINT64 data: xrt has no unsigned 64-bit element type"
STR = "STRING data: xrt has numeric tensors only"
VOLUMETRIC = "3-D (volumetric) operator: only 1-D and 2-D are supported"
BN_TRAIN = "BatchNormalization training mode: inference only"
DROPOUT_TRAIN = (
    "Dropout training: training_mode fed at run time (or a constant True) is refused, "
    "inference only"
)
POOL_INDICES = "the Indices output of MaxPool is not supported"
EMPTY = "zero-size (empty) tensors are not supported"
ANTIALIAS = "Resize antialias is not supported"
ASPECT = "Resize keep_aspect_ratio_policy other than stretch is not supported"
CROP = "Resize tf_crop_and_resize is not supported"
WRAP = "Pad mode wrap is not supported"
ALIGN = (
    "align_corners with a non-integer output length: the ONNX reference divides by the "
    "unrounded scale * length, xrt by the output length as onnxruntime and PyTorch do"
)

EXPECTED_FAILURES: dict[str, str] = {
    "test_add_uint64": U64,
    "test_averagepool_3d_default": VOLUMETRIC,
    "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False": VOLUMETRIC,
    "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True": VOLUMETRIC,
    "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False": VOLUMETRIC,
    "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True": VOLUMETRIC,
    "test_averagepool_3d_dilations_small": VOLUMETRIC,
    "test_batchnorm_epsilon_training_mode": BN_TRAIN,
    "test_batchnorm_example_training_mode": BN_TRAIN,
    "test_convtranspose_3d": VOLUMETRIC,
    "test_div_uint64": U64,
    "test_equal_string": STR,
    "test_equal_string_broadcast": STR,
    "test_equal_uint64": U64,
    "test_greater_equal_uint64": U64,
    "test_greater_uint64": U64,
    "test_less_equal_uint64": U64,
    "test_less_uint64": U64,
    "test_max_float64": FP64,
    "test_max_uint64": U64,
    "test_maxpool_3d_default": VOLUMETRIC,
    "test_maxpool_3d_dilations": VOLUMETRIC,
    "test_maxpool_3d_dilations_use_ref_impl": VOLUMETRIC,
    "test_maxpool_3d_dilations_use_ref_impl_large": VOLUMETRIC,
    "test_maxpool_with_argmax_2d_precomputed_pads": POOL_INDICES,
    "test_maxpool_with_argmax_2d_precomputed_strides": POOL_INDICES,
    "test_min_float64": FP64,
    "test_min_uint64": U64,
    "test_mod_float64_mixed_sign_fmod_0": FP64,
    "test_mod_float_edge_cases_fmod_0_float64": FP64,
    "test_mod_mixed_sign_float64": FP64,
    "test_mod_uint64": U64,
    "test_mul_uint64": U64,
    "test_pow_types_float32_uint64": U64,
    "test_reduce_l1_empty_set": EMPTY,
    "test_reduce_l2_empty_set": EMPTY,
    "test_reduce_log_sum_exp_default_axes_keepdims_example": FP64,
    "test_reduce_log_sum_exp_default_axes_keepdims_random": FP64,
    "test_reduce_log_sum_exp_do_not_keepdims_example": FP64,
    "test_reduce_log_sum_exp_do_not_keepdims_random": FP64,
    "test_reduce_log_sum_exp_empty_set": EMPTY,
    "test_reduce_log_sum_exp_keepdims_example": FP64,
    "test_reduce_log_sum_exp_keepdims_random": FP64,
    "test_reduce_log_sum_exp_negative_axes_keepdims_example": FP64,
    "test_reduce_log_sum_exp_negative_axes_keepdims_random": FP64,
    "test_reduce_max_empty_set": EMPTY,
    "test_reduce_max_empty_set_bool": EMPTY,
    "test_reduce_min_empty_set": EMPTY,
    "test_reduce_prod_empty_set": EMPTY,
    "test_reduce_sum_empty_set": EMPTY,
    "test_reduce_sum_empty_set_non_reduced_axis_zero": EMPTY,
    "test_reduce_sum_square_empty_set": EMPTY,
    "test_reshape_allowzero_reordered": EMPTY,
    "test_resize_downsample_scales_cubic_align_corners": ALIGN,
    "test_resize_downsample_scales_cubic_antialias": ANTIALIAS,
    "test_resize_downsample_scales_linear_align_corners": ALIGN,
    "test_resize_downsample_scales_linear_antialias": ANTIALIAS,
    "test_resize_downsample_sizes_cubic_antialias": ANTIALIAS,
    "test_resize_downsample_sizes_linear_antialias": ANTIALIAS,
    "test_resize_downsample_sizes_nearest_not_larger": ASPECT,
    "test_resize_downsample_sizes_nearest_not_smaller": ASPECT,
    "test_resize_tf_crop_and_resize": CROP,
    "test_resize_tf_crop_and_resize_axes_2_3": CROP,
    "test_resize_tf_crop_and_resize_axes_3_2": CROP,
    "test_resize_tf_crop_and_resize_extrapolation_value": CROP,
    "test_resize_upsample_sizes_nearest_not_larger": ASPECT,
    "test_resize_upsample_sizes_nearest_not_smaller": ASPECT,
    "test_split_zero_size_splits_opset13": EMPTY,
    "test_split_zero_size_splits_opset18": EMPTY,
    "test_sub_uint64": U64,
    "test_training_dropout": DROPOUT_TRAIN,
    "test_training_dropout_default": DROPOUT_TRAIN,
    "test_training_dropout_default_mask": DROPOUT_TRAIN,
    "test_training_dropout_mask": DROPOUT_TRAIN,
    "test_training_dropout_zero_ratio": DROPOUT_TRAIN,
    "test_training_dropout_zero_ratio_mask": DROPOUT_TRAIN,
    "test_wrap_pad": WRAP,
}
"""Case name -> why xrt does not pass it."""


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
