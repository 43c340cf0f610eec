"""Tensors (the manual's ``Tensor``): a `TensorType` over bytes in a `MemChunk`.

A tensor may have no data yet (``Tensor(ttype)``), get it from a chunk (`Tensor.set_data`,
shared chunks are fine) or allocate it (`Tensor.malloc_on`), move to another region
(`Tensor.to`), and convert from and to numpy (`Tensor.from_numpy`, `Tensor.numpy`).

Hardware layout. A tensor's bytes are normally stored in its logical ("software") layout:
the shape of its type, C order, in the type's axis order (``"NHWC"``). A backend may store
a tensor in a hardware layout instead, described by a `HwLayout` (for example
`ChannelTiled`, channels cut into blocks of 8/16/32 and zero-padded, as NPUs keep feature
maps; both live in `xrt.layout` and are re-exported here). `numpy()` always returns the
logical array; ``numpy(hardware=True)`` the stored one.

Readiness. A tensor a device is still computing is not ready: ``Tensor(..., check_func=f)``
calls ``f(device)`` until it returns True (then the tensor stays ready until `set_ready`
(False)). `is_ready`, `wait_for_ready`; reading data (`numpy`, `read`, `dump`, `to`) from a
tensor that is not ready raises XrtError 11012 rather than return stale bytes.

Dump formats (`Tensor.dump`): ``""`` (the default, as the manual's) writes the data as
stored; otherwise three letters ``[H|S][F|Q][B|T]`` choose the layout, the values and the
form. `xrt._tensor_dump` specifies them and the manual's rule of what may become what.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from xrt._checks import BufferLike, as_alignment, as_bool, as_seconds, as_size
from xrt._tensor_dump import (
    DUMP_FORMATS,
    DumpTarget,
    dump_values,
    resolve_dump_format,
    write_dump,
)
from xrt._tensor_values import as_array, exact_values
from xrt.accessor import AccessorInt
from xrt.device import Device, HostDevice
from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.layout import ChannelTiled, HwLayout
from xrt.memory import MemChunk, MemRegion, _dest_view, _src_view
from xrt.memptr import MemPtr

__all__ = ["DUMP_FORMATS", "ChannelTiled", "HwLayout", "Tensor"]

CheckFunc = Callable[[Device | None], bool]
"""Readiness function: called with the tensor's device, True once the data is valid."""


class Tensor:
    """A typed tensor, with or without data in a `MemChunk` (the manual's ``Tensor``).

    Args:
        ttype: Element type, shape, layout and quantization.
        chunk: Chunk holding the data, or None for a tensor without data yet.
        offset: Byte offset of the data in `chunk`.
        check_func: Readiness function, called with the tensor's device; the tensor is
            not ready until it returns True. Without one a tensor with data is ready.
        hw_layout: The hardware layout the data is stored in, if not the logical one.

    Raises:
        XrtError: 11010 for wrong types or a hardware layout that does not fit `ttype`;
            11003 when the data does not fit the chunk; 11012 for a freed chunk.
    """

    __slots__ = ("__weakref__", "_check_func", "_chunk", "_hw", "_offset", "_ready", "_type")

    def __init__(
        self,
        ttype: TensorType,
        chunk: MemChunk | None = None,
        offset: int = 0,
        check_func: CheckFunc | None = None,
        *,
        hw_layout: HwLayout | None = None,
    ) -> None:
        if not isinstance(ttype, TensorType):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"a Tensor needs a TensorType, got {type(ttype).__name__}"
            )
        if hw_layout is not None:
            if not isinstance(hw_layout, HwLayout):
                raise XrtError(ErrorCode.WRONG_TYPE, f"not a HwLayout: {hw_layout!r}")
            hw_layout.check(ttype)
        if ttype.quant is not None and not isinstance(ttype.quant, QuantParams):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"quantization must be QuantParams, got {ttype.quant!r}"
            )
        if callable(chunk) and not isinstance(chunk, MemChunk) and check_func is None:
            chunk, check_func = None, chunk  # the manual's Tensor(ttype, check_func)
        if check_func is not None and not callable(check_func):
            raise XrtError(ErrorCode.WRONG_TYPE, f"check_func must be callable: {check_func!r}")
        off = as_size(offset, "tensor offset")
        self._type = ttype
        self._hw = hw_layout
        self._chunk: MemChunk | None = None
        self._offset = 0
        self._check_func = check_func
        self._ready = check_func is None
        if chunk is not None:
            self.set_data(chunk, off)

    # -- construction from numpy -----------------------------------------------------------

    @classmethod
    def from_numpy(
        cls,
        array: np.ndarray,
        *,
        layout: str = "*",
        quant: QuantParams | None = None,
        dtype: DataType | str | None = None,
        region: MemRegion | None = None,
        hw_layout: HwLayout | None = None,
    ) -> Tensor:
        """A new tensor holding a copy of `array` (in its logical layout).

        Args:
            array: The values; its numpy dtype must be one of `DataType` (no silent casts:
                float64 gives a host-only FP64 tensor, convert with ``.astype(np.float32)``
                for an FP32 one).
            layout: Axis letters of the type (``"NHWC"``) or ``"*"``.
            quant: Quantization parameters of an integer tensor.
            dtype: Expected element type; must match ``array.dtype`` exactly.
            region: Where to allocate (default: ``HostDevice.default()``'s region).
            hw_layout: Store the data in this hardware layout.

        Raises:
            XrtError: 11010 for a dtype without a DataType or not matching `dtype`.
        """
        arr = as_array(array, "from_numpy")
        try:
            dt = DataType.from_numpy(arr.dtype)
        except XrtError:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"numpy dtype {arr.dtype} has no xrt DataType "
                f"(known: {', '.join(str(d.numpy) for d in DataType)}); convert it first",
            ) from None
        if dtype is not None and DataType.parse(dtype) is not dt:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"array holds {dt.manual_name}, expected {DataType.parse(dtype).manual_name}",
            )
        if not isinstance(layout, str):
            raise XrtError(ErrorCode.WRONG_TYPE, f"layout must be a str, got {layout!r}")
        ttype = TensorType(dt, arr.shape, layout, quant)
        if region is None:
            region = HostDevice.default_region()
        tensor = cls(ttype, hw_layout=hw_layout).malloc_on(region)
        tensor.copy_data(arr)
        return tensor

    # -- what it is ------------------------------------------------------------------------

    @property
    def tensor_type(self) -> TensorType:
        """The tensor's type (the manual's ``dtype()``)."""
        return self._type

    @property
    def dtype(self) -> DataType:
        """Element type."""
        return self._type.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """Logical shape."""
        return self._type.shape

    @property
    def layout(self) -> str:
        """Logical axis order (``"NHWC"``, ``"*"``)."""
        return self._type.layout

    @property
    def quant(self) -> QuantParams | None:
        """Quantization parameters, or None for a tensor that is not quantized."""
        return self._type.quant

    @property
    def hw_layout(self) -> HwLayout | None:
        """The hardware layout the data is stored in, or None (logical layout)."""
        return self._hw

    @property
    def storage_shape(self) -> tuple[int, ...]:
        """Shape of the stored array."""
        if self._hw is None:
            return self._type.shape
        return self._hw.storage_shape(self._type)

    @property
    def nbytes(self) -> int:
        """Bytes of storage the data needs (XrtError 11003 while a dimension is unknown)."""
        if self._hw is None:
            return self._type.bytes()
        self._type.numel()  # raises for unknown dimensions
        return self._hw.storage_bytes(self._type)

    @property
    def chunk(self) -> MemChunk | None:
        """The chunk holding the data, or None (``tensor.chunk()`` too: a chunk called
        returns itself)."""
        return self._chunk

    @property
    def offset(self) -> AccessorInt:
        """Byte offset of the data in its chunk (``tensor.offset()`` too, the manual's form)."""
        return AccessorInt(self._offset)

    @property
    def region(self) -> MemRegion | None:
        """The region the data is in (the manual's ``memRegion()``), or None."""
        if self._chunk is None:
            return None
        region = self._chunk.region
        assert isinstance(region, MemRegion)  # chunks come only from MemRegion.malloc
        return region

    @property
    def data_ptr(self) -> MemPtr:
        """Pointer to the first byte of the data (the manual's ``data()``).

        Raises:
            XrtError: 11012 when the tensor has no data.
        """
        return self._data()[0].begin + self._offset

    def has_data(self) -> bool:
        """True when the tensor has a (live) chunk."""
        return self._chunk is not None and not self._chunk.is_freed

    def is_on(self, region: MemRegion) -> bool:
        """True when the tensor's data is in `region`."""
        return self._chunk is not None and self._chunk.region is region

    def __repr__(self) -> str:
        if self._chunk is None:
            where = "no data"
        else:
            where = f"on {self._chunk.region.name!r} at {self._chunk.begin + self._offset!r}"
        hw = f", hw={self._hw.name}" if self._hw is not None else ""
        return f"Tensor({self._type!r}{hw}, {where})"

    # -- data ------------------------------------------------------------------------------

    def _data(self) -> tuple[MemChunk, int]:
        if self._chunk is None:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{self!r} has no data: malloc_on/set_data first")
        self._chunk._check_live()
        return self._chunk, self._offset

    def _readable(self) -> tuple[MemChunk, int]:
        data = self._data()
        if not self.is_ready():
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"{self!r} is not ready: wait_for_ready() before reading its data",
            )
        return data

    def set_data(self, chunk: MemChunk, offset: int = 0) -> Tensor:
        """Use ``chunk`` from byte `offset` as the tensor's data (the chunk may be shared).

        Returns:
            The tensor.

        Raises:
            XrtError: 11010 for a non-chunk, 11003 when the data does not fit, 11012 for a
                freed chunk.
        """
        if not isinstance(chunk, MemChunk):
            raise XrtError(ErrorCode.WRONG_TYPE, f"set_data needs a MemChunk, got {chunk!r}")
        chunk._check_live()
        off = as_size(offset, "tensor offset")
        need = self.nbytes
        if off + need > chunk.size:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{need} B of tensor data at offset {off} do not fit the {chunk.size}-byte chunk",
            )
        self._chunk = chunk
        self._offset = off
        return self

    def malloc_on(self, region: MemRegion, alignment: int | None = None) -> Tensor:
        """Allocate the tensor's data on `region`, replacing any chunk it had.

        Args:
            region: Where to allocate.
            alignment: Start address alignment; default: the element size (and at least the
                region's minimum).

        Returns:
            The tensor.
        """
        if not isinstance(region, MemRegion):
            raise XrtError(ErrorCode.WRONG_TYPE, f"malloc_on needs a MemRegion, got {region!r}")
        align = self.dtype.itemsize if alignment is None else as_alignment(alignment)
        self._chunk = region.malloc(self.nbytes, True, align)
        self._offset = 0
        return self

    def to(self, region: MemRegion) -> Tensor:
        """This tensor if its data is on `region`, else a copy there (a new, ready tensor).

        Raises:
            XrtError: 11012 when the tensor has no data or is not ready.
        """
        if not isinstance(region, MemRegion):
            raise XrtError(ErrorCode.WRONG_TYPE, f"to() needs a MemRegion, got {region!r}")
        if self.is_on(region):
            return self
        chunk, offset = self._readable()
        out = Tensor(self._type, hw_layout=self._hw).malloc_on(region)
        assert out._chunk is not None
        region.memcpy(out._chunk.begin, chunk.region, chunk.begin + offset, self.nbytes)
        return out

    def _span(self, offset: object, nbytes: int | None, room: int, what: str) -> tuple[int, int]:
        off = as_size(offset, f"{what} offset")
        n = room if nbytes is None else as_size(nbytes, f"{what} size")
        if off + n > self.nbytes:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{what} of {n} B at offset {off} runs past the tensor's {self.nbytes} B",
            )
        return off, n

    def read(self, dest: BufferLike, offset: int = 0, nbytes: int | None = None) -> None:
        """Copy raw stored bytes (from `offset` in the tensor's data) into `dest`."""
        chunk, base = self._readable()
        dv = _dest_view(dest, "read destination")
        off, n = self._span(offset, nbytes, len(dv), "read")
        chunk.read(dv, base + off, n)

    def write(self, src: BufferLike, offset: int = 0, nbytes: int | None = None) -> None:
        """Copy raw bytes from `src` into the tensor's stored data at `offset`."""
        chunk, base = self._data()
        sv = _src_view(src, "write source")
        off, n = self._span(offset, nbytes, len(sv), "write")
        chunk.write(sv, base + off, n)

    def copy_from(
        self,
        src: Tensor,
        *,
        src_offset: int = 0,
        dest_offset: int = 0,
        nbytes: int | None = None,
    ) -> None:
        """Copy raw stored bytes from another tensor (any region); default: all of them."""
        if not isinstance(src, Tensor):
            raise XrtError(ErrorCode.WRONG_TYPE, f"copy_from needs a Tensor, got {src!r}")
        s_chunk, s_base = src._readable()
        d_chunk, d_base = self._data()
        start = as_size(src_offset, "copy source offset")
        s_off, n = src._span(start, nbytes, max(src.nbytes - start, 0), "copy source")
        d_off, _ = self._span(dest_offset, n, n, "copy destination")
        d_chunk.copy_from(s_chunk, src_offset=s_base + s_off, dest_offset=d_base + d_off, nbytes=n)

    def copy_data(self, array: np.ndarray) -> Tensor:
        """Copy a logical-layout numpy array into the tensor (the manual's ``copyData``).

        Raises:
            XrtError: 11010 when the dtype differs (no silent casts), 11003 when the shape
                differs, 11012 when the tensor has no data.
        """
        chunk, base = self._data()
        arr = as_array(array, "copy_data")
        if arr.dtype != self.dtype.numpy:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"array dtype {arr.dtype} does not match the tensor's {self.dtype.manual_name} "
                f"({self.dtype.numpy})",
            )
        if arr.shape != self.shape:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"array shape {list(arr.shape)} does not match the tensor's {list(self.shape)}",
            )
        if self._hw is not None:
            arr = self._hw.to_hardware(arr, self._type)
        chunk.write(arr, base, self.nbytes)
        return self

    def fill(self, fn: Callable[[Any], Any] | float | bool, *, vectorized: bool = False) -> Tensor:
        """Fill the tensor: element ``i`` (flat index, logical C order) gets ``fn(i)``.

        Args:
            fn: A function of the flat index, or a constant.
            vectorized: Call ``fn`` once with the array of all indices instead.

        Returns:
            The tensor.

        Raises:
            XrtError: 11003 when a value does not fit the element type exactly (fractions
                for integers, overflow), 11010 for non-numbers, 11012 without data.
        """
        self._data()
        n = self._type.numel()
        if callable(fn):
            if as_bool(vectorized, "vectorized"):
                values = as_array(fn(np.arange(n)), "fill")
                if values.shape not in ((n,), ()):
                    raise XrtError(
                        ErrorCode.OUT_OF_RANGE,
                        f"vectorized fill returned shape {values.shape}, expected ({n},)",
                    )
                values = np.broadcast_to(values, (n,))
            else:
                values = as_array([fn(i) for i in range(n)], "fill")
                if values.shape != (n,):
                    raise XrtError(
                        ErrorCode.WRONG_TYPE, "fill: the function must return one number"
                    )
        else:
            value = as_array(fn, "fill")
            if value.shape != ():
                raise XrtError(ErrorCode.WRONG_TYPE, f"fill takes a function or a number: {fn!r}")
            values = np.full(n, value)
        self.copy_data(exact_values(values, self.dtype, "fill").reshape(self.shape))
        return self

    def numpy(self, copy: bool = True, *, hardware: bool = False) -> np.ndarray:
        """The tensor's values as a numpy array.

        Args:
            copy: False: a zero-copy view of the chunk's memory (host-visible regions and the
                logical layout only); it aliases the data and sees later writes.
            hardware: Return the stored array (hardware layout) instead of the logical one.

        Raises:
            XrtError: 11012 without data or when not ready; 11010 for ``copy=False`` on a
                region that is not host-visible or a tensor that needs re-tiling.
        """
        copy = as_bool(copy, "copy")
        hardware = as_bool(hardware, "hardware")
        chunk, base = self._readable()
        dt = self.dtype.numpy
        shape = self.storage_shape
        if copy:
            stored = np.empty(shape, dtype=dt)
            chunk.read(stored, base, self.nbytes)
        else:
            if self._hw is not None and not hardware:
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    "numpy(copy=False) cannot give the logical view of a tensor stored in a "
                    "hardware layout: use copy=True or hardware=True",
                )
            stored = np.frombuffer(chunk.view(base, self.nbytes), dtype=dt).reshape(shape)
        if self._hw is None or hardware:
            return stored
        return self._hw.to_software(stored, self._type)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    # -- readiness -------------------------------------------------------------------------

    def set_check_func(self, check_func: CheckFunc | None) -> Tensor:
        """Set the readiness function (None: ready); the tensor is not ready until it says so."""
        if check_func is not None and not callable(check_func):
            raise XrtError(ErrorCode.WRONG_TYPE, f"check_func must be callable: {check_func!r}")
        self._check_func = check_func
        self._ready = check_func is None
        return self

    def set_ready(self, ready: bool) -> Tensor:
        """Mark the tensor ready or not (e.g. a backend clears it when it starts computing)."""
        self._ready = as_bool(ready, "ready")
        return self

    def is_ready(self) -> bool:
        """True when the tensor has data and is ready (asking the check function if needed).

        Raises:
            XrtError: 11010 when the check function returns something other than a bool.
        """
        if not self.has_data():
            return False
        if self._ready:
            return True
        if self._check_func is not None:
            region = self.region
            assert region is not None
            device = region.device
            assert device is None or isinstance(device, Device)  # set by Device.add_region
            ok = self._check_func(device)
            if not isinstance(ok, bool | np.bool_):
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"check function {self._check_func!r} returned {ok!r}, not a bool",
                )
            if ok:
                self._ready = True
        return self._ready

    def wait_for_ready(self, timeout: float, interval: float = 0.0) -> bool:
        """Wait until the tensor is ready; True if it became ready, False on timeout.

        Args:
            timeout: Seconds (or a `datetime.timedelta`) to wait at most.
            interval: Seconds to sleep between checks (0: just yield the CPU).

        Raises:
            XrtError: 11012 when the tensor has no data (it could never become ready), 11003
                for negative times.
        """
        limit = as_seconds(timeout, "timeout")
        pause = as_seconds(interval, "interval")
        self._data()
        deadline = time.monotonic() + limit
        while True:
            if self.is_ready():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))

    # -- dump ------------------------------------------------------------------------------

    def resolve_dump_format(self, format: str, fallback: bool = False) -> str:
        """The format `dump` would write for `format` (see the module docstring).

        Raises:
            XrtError: 11010 for an unknown format, or an impossible one without `fallback`.
        """
        return resolve_dump_format(self, format, fallback)

    def dump_array(self, format: str = "", fallback: bool = False) -> np.ndarray:
        """The array `dump` writes for `format` (``""``: the stored array)."""
        return dump_values(self, resolve_dump_format(self, format, fallback))

    def dump(self, stream: DumpTarget, format: str = "", *, fallback: bool = False) -> str:
        """Write the tensor's values to `stream` in `format`.

        Args:
            stream: A binary stream, a text stream (T formats only) or a file path.
            format: ``""`` (default, as the manual): the data as stored in memory; or
                ``[H|S][F|Q][B|T]`` (see the module docstring).
            fallback: Degrade H to S and Q to F when they are impossible instead of failing.

        Returns:
            The format actually written.

        Raises:
            XrtError: 11010 for an unknown or impossible format or a text stream given a
                binary format; 11012 without data or when not ready; 11002 when the file
                cannot be created.
        """
        fmt = resolve_dump_format(self, format, fallback)
        write_dump(self, stream, fmt)
        return fmt
