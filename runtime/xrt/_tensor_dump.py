"""The dump formats of `Tensor.dump`: which format a request resolves to, the array it
writes, and the binary and text writers. They read a tensor through its public API
(`DumpSource`), so the tensor itself stays about data, layout and readiness.

Dump formats (`Tensor.dump`): the empty format (the default, as in the manual's
``dump(std::ostream& os, const std::string& format = "")``) writes the data exactly as
stored in memory (hardware layout included, native little-endian values); otherwise three
letters, one from each pair:

- layout: ``H`` the hardware (stored) layout, ``S`` the software (logical) layout;
- values: ``F`` float, ``Q`` the quantized (raw integer) values;
- form: ``B`` binary (raw little-endian array, C order, no header), ``T`` text: one
  header line ``# xrt.Tensor format=SFT dtype=float32 shape=[1, 4] layout=NHWC type=FP32``
  (the format written, the dtype and shape of the values, their layout), then one value
  per line in C order: integers in decimal, floats with 9 significant digits, which read
  back exactly as the header's dtype (``numpy.loadtxt(f).astype(dtype)``).

The manual's rule: a tensor stored in H can be dumped as S, and one holding Q values can
be dumped as F; never the reverse. So:

- ``S`` is always possible (converted from the hardware layout when there is one);
- ``H`` needs a hardware layout: on a tensor without one it is an error (11010);
- ``F`` is always possible: float tensors give their own values in their own type, quantized
  ones are dequantized to float32 (``scale * (q - zero_point)``), plain integer and bool
  tensors are converted to float32;
- ``Q`` needs integer values: quantized tensors give the raw integers, plain integer and
  bool tensors their values; on a float tensor it is an error (11010).

With ``fallback=True`` the impossible requests degrade instead of failing: H becomes S and
Q becomes F (useful to dump every tensor of a network with one format); the text header
always names the format actually written. ``HF`` on a quantized tensor with a hardware
layout dequantizes the logical values and re-tiles them, so padding reads 0.0.
"""

from __future__ import annotations

import io
import os
from typing import IO, Protocol

import numpy as np

from xrt._checks import as_bool
from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.layout import HwLayout

__all__ = [
    "DUMP_FORMATS",
    "DumpSource",
    "DumpTarget",
    "dump_values",
    "resolve_dump_format",
    "write_dump",
]

DUMP_FORMATS = tuple(a + b + c for a in "HS" for b in "FQ" for c in "BT")
"""The eight dump formats: ``HFB``, ``HFT``, ``HQB``, ..., ``SQT``."""

DumpTarget = IO[bytes] | IO[str] | str | os.PathLike[str]
"""Where a dump goes: a binary stream, a text stream (T formats only) or a file path."""


class DumpSource(Protocol):
    """What the dump writers read of a tensor (`xrt.tensor.Tensor` is the one)."""

    @property
    def tensor_type(self) -> TensorType: ...
    @property
    def dtype(self) -> DataType: ...
    @property
    def layout(self) -> str: ...
    @property
    def hw_layout(self) -> HwLayout | None: ...
    def numpy(self, copy: bool = True, *, hardware: bool = False) -> np.ndarray: ...


def resolve_dump_format(tensor: DumpSource, format: str, fallback: bool = False) -> str:
    """The format `Tensor.dump` writes for `format` on `tensor` (``""``: the stored data).

    Raises:
        XrtError: 11010 for an unknown format, or an impossible one without `fallback`.
    """
    fallback = as_bool(fallback, "fallback")
    if isinstance(format, str) and format == "":
        return ""  # the raw stored data: always possible
    if not isinstance(format, str) or format not in DUMP_FORMATS:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"dump format must be one of {', '.join(DUMP_FORMATS)}, got {format!r}",
        )
    layout, values, form = format
    if layout == "H" and tensor.hw_layout is None:
        if not fallback:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"dump {format!r}: {tensor!r} has no hardware layout, and S cannot become H "
                f"(use S{values}{form}, or fallback=True)",
            )
        layout = "S"
    if values == "Q" and tensor.dtype.is_float:
        if not fallback:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"dump {format!r}: {tensor.tensor_type!r} holds float values, and F cannot "
                f"become Q (use {layout}F{form}, or fallback=True)",
            )
        values = "F"
    return layout + values + form


def dump_values(tensor: DumpSource, fmt: str) -> np.ndarray:
    """The array a dump in the resolved format `fmt` writes (``""``: the stored array)."""
    if fmt == "":
        return tensor.numpy(hardware=True)
    layout, values = fmt[0], fmt[1]
    arr = tensor.numpy()
    if values == "F":
        quant = tensor.tensor_type.quant
        if quant is not None and not tensor.dtype.is_float:
            arr = quant.dequantize(arr)
        elif not tensor.dtype.is_float:
            arr = arr.astype(np.float32)
    if layout == "H":
        assert tensor.hw_layout is not None
        arr = tensor.hw_layout.to_hardware(arr, tensor.tensor_type)
    return arr


def write_dump(tensor: DumpSource, target: DumpTarget, fmt: str) -> None:
    """Write `tensor` in the resolved format `fmt` to a stream or a file path.

    Raises:
        XrtError: 11010 for a target that is neither, or a text stream given a binary
            format; 11012 without data or when not ready (before any file is created);
            11002 when the file cannot be created.
    """
    if isinstance(target, str | os.PathLike):
        arr = dump_values(tensor, fmt)  # fails (no data, not ready) before creating the file
        try:
            fh = open(target, "wb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise XrtError(
                ErrorCode.FILE_NOT_FOUND, f"cannot write dump file {str(target)!r}: {exc}"
            ) from None
        with fh:
            _write(fh, arr, fmt, tensor)
        return
    if not callable(getattr(target, "write", None)):
        raise XrtError(ErrorCode.WRONG_TYPE, f"dump needs a stream or a file path, got {target!r}")
    _write(target, dump_values(tensor, fmt), fmt, tensor)


def _write(stream: IO[bytes] | IO[str], arr: np.ndarray, fmt: str, tensor: DumpSource) -> None:
    """Write `arr` (the values of `tensor` in format `fmt`) to an open stream."""
    text_stream = isinstance(stream, io.TextIOBase)
    if fmt == "" or fmt[2] == "B":
        if text_stream:
            raise XrtError(ErrorCode.WRONG_TYPE, f"dump {fmt!r} is binary: give a binary stream")
        le = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        stream.write(le.tobytes())  # type: ignore[arg-type]
        return
    hw = tensor.hw_layout
    layout_name = hw.name if fmt[0] == "H" and hw is not None else tensor.layout
    header = (
        f"xrt.Tensor format={fmt} dtype={arr.dtype} shape={list(arr.shape)} "
        f"layout={layout_name} type={tensor.dtype.manual_name}"
    )
    flat = arr.reshape(-1)
    if arr.dtype.kind == "f" or arr.dtype == DataType.BF16.numpy:
        lines = [f"{v:.9g}" for v in flat.astype(np.float32).tolist()]
    else:
        lines = [str(int(v)) for v in flat.tolist()]
    text = "# " + header + "\n" + "".join(v + "\n" for v in lines)
    if text_stream:
        stream.write(text)  # type: ignore[arg-type]
    else:
        stream.write(text.encode("ascii"))  # type: ignore[arg-type]
