"""A model and its inputs as the command lines take them (``xrt run``, ``npu-emu debug``):
a network file (``.json``) or ONNX, and ``--input`` files (``FILE.npy`` or
``NAME=FILE.npy``, checked as hostile input) or seeded random values."""

from __future__ import annotations

from xrt._model_input import inputs, load_network

__all__ = ["inputs", "load_network"]
