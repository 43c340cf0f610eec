"""How backends and the session move values between tensors and numpy arrays: through a
zero-copy view where the memory allows (host-visible, logical layout), else by copying."""

from __future__ import annotations

import numpy as np

from xrt.tensor import Tensor

__all__ = ["read_array", "write_array"]


def read_array(tensor: Tensor) -> np.ndarray:
    """The tensor's logical values as numpy: a zero-copy view when the memory allows."""
    region = tensor.region
    if region is not None and region.host_visible and tensor.hw_layout is None:
        return tensor.numpy(copy=False)
    return tensor.numpy()


def write_array(tensor: Tensor, array: np.ndarray) -> None:
    """Copy `array` (logical layout, exact dtype and shape) into `tensor`."""
    region = tensor.region
    if region is not None and region.host_visible and tensor.hw_layout is None:
        np.copyto(tensor.numpy(copy=False), array, casting="no")
    else:
        tensor.copy_data(np.ascontiguousarray(array))
