"""The manual's data-structure names (chapter 2: pointers, regions, chunks, devices,
tensors) beside ours: rows of the table (`xrt.manual.table`)."""

from __future__ import annotations

from xrt.manual.table import Kind, ManualName, Section

N = ManualName
K = Kind

__all__ = ["DEVICES", "MEMORY", "POINTERS", "REGISTERS", "TENSORS"]

_PTR = "xrt.MemPtr"

# fmt: off
POINTERS = Section(
    "pointers",
    (
        N("xrt", "MemPtr", "xrt.memptr.MemPtr", K.MODULE, "immutable, hashable",
          doc_manual="`MemPtr`", doc_ours="`xrt.MemPtr`"),
        N(_PTR, "MemPtr", "", K.FORM,
          'a "C pointer" is a host buffer + offset; it keeps the buffer alive (never dangles)',
          doc_manual="`MemPtr(cptr)`", doc_ours="`MemPtr(buffer, offset=0)`"),
        N(_PTR, "MemPtr", "", K.FORM, "physical address",
          doc_manual="`MemPtr(addr)`", doc_ours="`MemPtr(addr)` / `MemPtr(addr=...)`"),
        N(_PTR, "MemPtr", "", K.FORM, "kind BOTH: host-visible memory",
          doc_manual="`MemPtr(cptr, addr)`", doc_ours="`MemPtr(buffer, addr, offset=0)`"),
        N(_PTR, "NullPtr", "null", K.STATIC, "only it is null; address 0 is not",
          doc_ours="`MemPtr.null()` (also `MemPtr()`)"),
        N(_PTR, "Init", "null", K.STATIC, "the manual's other null pointer (2.1)"),
        N(_PTR, "isNull", "is_null", K.PROPERTY, "also `bool(ptr)` is False only for null",
          doc_manual="`isNull()`"),
        N(_PTR, "ptype", "kind", K.PROPERTY,
          "`PtrKind.CPTR / ADDR / BOTH` (= manual `PtrType` values 0/1/2); null is CPTR",
          doc_manual="`ptype()`"),
        N("xrt", "PtrType", "xrt.memptr.PtrKind", K.CLASS, "members `CPTR`, `ADDR`, `BOTH`",
          doc_ours="`xrt.PtrKind`"),
        N("xrt.PtrKind", "CPTR", "CPTR", K.SAME, "a C pointer: host memory",
          doc_manual="`PtrType::CPTR`", doc_ours="`PtrKind.CPTR`"),
        N("xrt.PtrKind", "ADDR", "ADDR", K.SAME, "a physical address: device memory",
          doc_manual="`PtrType::ADDR`", doc_ours="`PtrKind.ADDR`"),
        N("xrt.PtrKind", "BOTH", "BOTH", K.SAME, "both: host-visible device memory",
          doc_manual="`PtrType::BOTH`", doc_ours="`PtrKind.BOTH`"),
        N(_PTR, "addr", "addr", K.ACCESSOR, "XrtError 11010 for host-only and null pointers"),
        N(_PTR, "cptr", "cptr", K.SAME,
          "a memoryview to the end of the buffer; XrtError 11010 for ADDR pointers. Also "
          "`host_bytes(n)`, `host_address`, `buffer`, `offset`. A method as in the manual "
          "(a property until 0.1)",
          doc_manual="`cptr()`", doc_ours="`cptr()`"),
        N(_PTR, "", "", K.FORM,
          "physical pointers compare by address (ADDR == BOTH at the same address); host "
          "pointers by host address; mixing the two spaces: `!=`, and ordering/subtracting "
          "raises 11010 (*decided*). As a C pointer (manual 2.1 moves an 8-byte buffer's "
          "pointer by 40), a host pointer may point outside its buffer; `cptr`/`host_bytes` "
          "there raise 11003",
          doc_manual="`+ n`, `- n`, `p - q`, `< <= > >=`, `==`", doc_ours="same"),
    ),
)

_REGION = "xrt.MemRegion"
_CHUNK = "xrt.MemChunk"
_MANAGER = "xrt.MemManager"

MEMORY = Section(
    "memory",
    (
        N("xrt", "MemRegion", "xrt.memory.MemRegion", K.MODULE,
          "`name`, `base`, `size`, `end`, `device`, `min_alignment`, `host_visible`",
          doc_manual="`MemRegion`", doc_ours="`xrt.MemRegion` (abstract)"),
        N(_REGION, "read", "read", K.SAME,
          "`dest`: writable buffer or host MemPtr; `src`: MemPtr or int physical address",
          doc_manual="`MemRegion::read(dest, src, size)`",
          doc_ours="`region.read(dest, src, nbytes=None)`"),
        N(_REGION, "write", "write", K.SAME,
          "`src`: any buffer (any numpy layout) or host MemPtr",
          doc_manual="`MemRegion::write(dest, src, size)`",
          doc_ours="`region.write(dest, src, nbytes=None)`"),
        N(_REGION, "memcpy", "memcpy", K.SAME, "memmove semantics",
          doc_manual="`MemRegion::memcpy(dest, src, size)`",
          doc_ours="`region.memcpy(dest, src, nbytes)`"),
        N(_REGION, "memcpy", "", K.FORM,
          "through the host unless the transport overrides `_memcpy_from`",
          doc_manual="`MemRegion::memcpy(dest, src_region, src, size)`",
          doc_ours="`region.memcpy(dest, src_region, src, nbytes)`"),
        N(_REGION, "malloc", "malloc", K.SAME,
          "alignment is at least `min_alignment`; `auto_free` must be a bool (not `0`)",
          doc_manual="`malloc(byte_size, auto_free=true, alignment=1)`",
          doc_ours="`region.malloc(nbytes, auto_free=True, alignment=1)`"),
        N(_REGION, "malloc", "", K.FORM,
          "`begin` must be a `MemPtr` (an int first argument means a size); addresses are "
          "physical: the manual's board sees PL DDR from 0 (`plddr.malloc(MemPtr(8192), "
          "1024)`, 1.5), this NPU from `plddr.base` (0x100000000), so the manual's address "
          "is 11003 saying so and naming `MemPtr(plddr.base + 8192)`",
          doc_manual="`malloc(begin, byte_size, deleter, auto_free=true)`",
          doc_ours="`region.malloc(begin: MemPtr, nbytes, deleter=None, auto_free=True)`"),
        N(_REGION, "free", "free", K.SAME, "also `chunk.free()`",
          doc_manual="`MemRegion::free`", doc_ours="`region.free(chunk or begin)`"),
        N(_REGION, "memManager", "mem_manager", K.PROPERTY, "",
          doc_manual="`memManager()`", doc_ours="`region.mem_manager`"),
        N(_REGION, "device", "device", K.ACCESSOR, "a device called returns itself",
          doc_ours="`region.device` or `region.device()`"),
        N(_MANAGER, "getAllMemChunk", "all_chunks", K.SAME, "address order",
          doc_manual="`MemManager::getAllMemChunk()`", doc_ours="`mem_manager.all_chunks()`"),
        N(_MANAGER, "getMemChunk", "get_chunk", K.SAME, "exact begin and size, else None",
          doc_manual="`MemManager::getMemChunk(ptr, size)`",
          doc_ours="`mem_manager.get_chunk(begin, nbytes)`"),
        N(_MANAGER, "getMemRegionInfo", "info", K.SAME,
          "`{base, size, chunks, used, free, largest_free}`; also `used_bytes`, `free_bytes`, "
          "`largest_free_block`, `chunk_count`",
          doc_manual="`MemManager::getMemRegionInfo()`", doc_ours="`mem_manager.info()`"),
        N("xrt", "MemChunk", "xrt.memory.MemChunk", K.MODULE,
          "made only by `malloc`; a handle: `copy.copy` gives the same chunk, pickling is "
          "refused", doc_manual="`MemChunk`", doc_ours="`xrt.MemChunk`"),
        N(_CHUNK, "begin", "begin", K.SAME, "plus `end`, `auto_free`, `is_freed`, `len(chunk)`"),
        N(_CHUNK, "byte_size", "size", K.SAME, "the same property under both names"),
        N(_CHUNK, "region", "region", K.SAME, ""),
        N(_CHUNK, "read", "read", K.SAME, "also `tobytes(offset, nbytes)`",
          doc_manual="`read(dest, src_offset, byte_size)`",
          doc_ours="`chunk.read(dest, offset=0, nbytes=None)`"),
        N(_CHUNK, "write", "write", K.SAME, "",
          differs="argument order: buffer first, like `read` (*decided*)",
          doc_manual="`write(dest_offset, src, byte_size)`",
          doc_ours="`chunk.write(src, offset=0, nbytes=None)`"),
        N(_CHUNK, "copyFrom", "copy_from", K.SAME, "any two regions",
          doc_manual="`copyFrom(dest_offset, src_chunk, src_offset, byte_size)`",
          doc_ours="`chunk.copy_from(src, *, src_offset=0, dest_offset=0, nbytes=None)`"),
        N(_CHUNK, "free", "free", K.SAME, "double free: XrtError 11012",
          doc_manual="`free()`", doc_ours="`chunk.free()`"),
        N(_CHUNK, "isOn", "is_on", K.SAME, "",
          doc_manual="`isOn(region)`", doc_ours="`chunk.is_on(region)`"),
        N(_CHUNK, "", "view", K.ADDED, "zero-copy memoryview on host-visible regions",
          doc_ours="`chunk.view(offset, nbytes)`"),
        N("xrt", "HostMemRegion", "xrt.memory.HostMemRegion", K.MODULE,
          "chunks are numpy buffers, zeroed; pointers are CPTR; `capacity` optional",
          doc_manual="`HostMemRegion`", doc_ours="`xrt.HostMemRegion`"),
    ),
)

_REG = "xrt.RegRegion"

REGISTERS = Section(
    "registers",
    (
        N("xrt", "RegRegion", "xrt.registers.RegRegion", K.MODULE,
          "`name`, `base`, `size`, `device`, `regmap`",
          doc_manual="`RegRegion`", doc_ours="`xrt.RegRegion` (abstract)"),
        N(_REG, "read", "read", K.SAME,
          "absolute unless relative; 4-byte aligned, in range, else 11003; the manual's "
          "`uint64_t`: the registers are 32 bits, a 64-bit quantity is a LO/HI pair "
          "(`width=64`: LO then HI in one batch, as `writeq` on a 32-bit bus; with a map, "
          "only at a pair's LO register)",
          doc_manual="`uint64_t read(addr, relative=false)`",
          doc_ours="`region.read(addr, relative=False, *, width=32)`"),
        N(_REG, "write", "write", K.SAME,
          "a value wider than the register is 11003 naming it (`npu.SCRATCH (32 bits)`); "
          "`width=64` writes a LO/HI pair, LO then HI",
          doc_manual="`write(addr, uint64_t data, relative=false)`",
          doc_ours="`region.write(addr, value, relative=False, *, width=32)`"),
        N("xrt.registers.RegisterFile", "", "pair", K.ADDED,
          "the 64-bit LO/HI pairs of the map (`CYCLES`, `PROG_ADDR`, `BASE0`..., DMA `SRC`, "
          "`DST`...: `RegisterBlockInfo.pairs`), read and written LO then HI",
          doc_ours='`region.regs.pair("CYCLES").read() / .write(v)`'),
        N(_REG, "", "execute", K.ADDED,
          "batch of `RegRead`, `RegWrite`, `RegMaskedWrite`, `RegPoll`: one round trip",
          doc_ours="`region.execute(ops, relative=False)`"),
        N(_REG, "", "batch", K.ADDED,
          "builder (`with region.batch() as b: ...`), names and fields allowed",
          doc_ours="`region.batch()`"),
        N(_REG, "", "poll", K.ADDED, "poll gives up with XrtError 11015",
          doc_ours="`region.write_masked(addr, value, mask)`, "
          "`region.poll(addr, mask, expected, ...)`"),
        N(_REG, "", "regs", K.ADDED, "named access through the generated register map",
          doc_ours="`region.regs.NAME.read() / .write(v) / .modify(F=v) / .read_fields() / "
          ".poll(F=v)`"),
        N(_REG, "", "regs", K.ADDED, "field writes are w1c- and pulse-safe read-modify-writes",
          doc_ours="`region.regs.NAME.FIELD.read() / .write(v) / .poll(v)`"),
    ),
)

_DEV = "xrt.Device"
_HOST = "xrt.HostDevice"

DEVICES = Section(
    "devices",
    (
        N("xrt", "Device", "xrt.device.Device", K.MODULE,
          "the base of every device: named memory and register regions. `Device()` with "
          "no argument (the manual's examples) opens the default device: `$XRT_DEVICE` if "
          "set, else `sim://buyi`, a simulated Buyi NPU of this process (the emulator's "
          "entry point; docs/runtime-transports.md)",
          doc_manual="`Device`, `Device()`", doc_ours="`xrt.Device`, `Device()`"),
        N(_DEV, "Open", "open", K.STATIC,
          "registry by scheme (and scheme + host), then the `xrt.devices` entry points "
          "(`sim://`); unknown scheme: 11010 listing both", doc_manual="`Device::Open(url)`",
          doc_ours="`Device.open(url)`"),
        N(_DEV, "Close", "close", K.SAME,
          "idempotent; also `with Device.open(...) as dev:`; afterwards regions raise 11012",
          doc_manual="`Device::Close(device)`",
          doc_ours="`device.close()` (so `Device.Close(device)` too)"),
        N(_DEV, "defaultMemRegion", "default_mem_region", K.SAME, "",
          doc_manual="`defaultMemRegion()`", doc_ours="`default_mem_region()`"),
        N(_DEV, "defaultRegRegion", "default_reg_region", K.SAME, "",
          doc_manual="`defaultRegRegion()`", doc_ours="`default_reg_region()`"),
        N(_DEV, "getMemRegion", "get_mem_region", K.SAME, "unknown name: 11010 listing the names",
          doc_manual="`getMemRegion(name)`", doc_ours="`get_mem_region(name)`"),
        N(_DEV, "getRegRegion", "get_reg_region", K.SAME, "unknown name: 11010 listing the names",
          doc_manual="`getRegRegion(name)`", doc_ours="`get_reg_region(name)`"),
        N(_DEV, "setDefaultMemRegion", "set_default_mem_region", K.SAME, "returns the device",
          doc_manual="`setDefaultMemRegion(name)`", doc_ours="`set_default_mem_region(name)`"),
        N(_DEV, "setDefaultRegRegion", "set_default_reg_region", K.SAME, "returns the device",
          doc_manual="`setDefaultRegRegion(name)`", doc_ours="`set_default_reg_region(name)`"),
        N(_DEV, "malloc", "malloc", K.SAME, "",
          differs="the region is a keyword argument",
          doc_manual="`malloc(byte_size)` / `malloc(region, byte_size)`",
          doc_ours="`device.malloc(nbytes, *, region=None, auto_free=True, alignment=1)`"),
        N(_DEV, "readReg", "read_reg", K.SAME, "",
          differs="the region is a keyword argument",
          doc_manual="`readReg(addr, relative)` / `readReg(region, addr, relative)`",
          doc_ours="`device.read_reg(addr, relative=False, *, region=None)`"),
        N(_DEV, "writeReg", "write_reg", K.SAME, "",
          doc_manual="`writeReg(...)`",
          doc_ours="`device.write_reg(addr, value, relative=False, *, region=None)`"),
        N(_DEV, "", "wait_irq", K.ADDED,
          "11012 on devices without an interrupt line (the host device)",
          doc_ours="`device.wait_irq(timeout_s) -> bool`, `device.has_irq`"),
        N("xrt", "ICRAFT_REGISTER_DEVICE", "xrt.device.register_device", K.DIFFERS,
          "the registry; the factory gets a parsed `DeviceURL`",
          differs="a C++ macro; in Python a class decorator",
          doc_manual='`ICRAFT_REGISTER_DEVICE("axi://ql100aiu", T)`',
          doc_ours='`@register_device("axi://ql100aiu")`, `registered_devices()`'),
        N(_DEV, "ICRAFT_DECLARE_DEVICE_NODE", "", K.DIFFERS,
          "regions are built in `__init__` (docs below, for transport authors)",
          differs="C++ node declarations; in Python a subclass",
          doc_manual="`ICRAFT_DECLARE_DEVICE_NODE(T){...}`", doc_ours="`class T(Device)`"),
        N(_DEV, "ICRAFT_MEM_REGION_FIELD", "add_region", K.DIFFERS, "",
          differs="a C++ macro; in Python a method",
          doc_manual="`ICRAFT_MEM_REGION_FIELD(name, T)`",
          doc_ours="`self.add_region(region)`"),
        N(_DEV, "ICRAFT_DEFAULT_MEM_REGION_FIELD", "add_region", K.DIFFERS,
          "also for `ICRAFT_DEFAULT_REG_REGION_FIELD`",
          differs="a C++ macro; in Python a method",
          doc_manual="`ICRAFT_DEFAULT_MEM_REGION_FIELD(name, T)`",
          doc_ours="`self.add_region(region, default=True)`"),
        N(_DEV, "ICRAFT_DEFAULT_REG_REGION_FIELD", "add_region", K.DIFFERS, "",
          differs="a C++ macro; in Python a method",
          doc_manual="`ICRAFT_DEFAULT_REG_REGION_FIELD(name, T)`",
          doc_ours="`self.add_region(region, default=True)`"),
        N("xrt", "", "xrt.device.DeviceURL", K.FORM,
          "`0x...` and decimal values become ints",
          doc_manual="URL `axi://ql100aiu?npu=0x40000000&dma=0x80000000`",
          doc_ours="`DeviceURL.parse(url)`: `scheme`, `host`, `port`, `path`, `params`"),
        N("xrt", "HostDevice", "xrt.device.HostDevice", K.MODULE,
          "the host as a device: one memory region", doc_ours="`xrt.HostDevice`"),
        N(_HOST, "Default", "default", K.STATIC, "process-wide; its `close()` does nothing"),
        N(_HOST, "MemRegion", "default_region", K.STATIC, ""),
        N(_HOST, "HostDevice", "", K.FORM, "an independent host device",
          doc_manual="`HostDevice()`",
          doc_ours='`HostDevice(capacity=None)` or `Device.open("host://?capacity=...")`'),
        N(_DEV, "Open", "", K.FORM,
          "both build `BuyiDevice` or `ZG330Device` (`xrt.npu_device`): regions `npu`, "
          "`dma`, `udma`, `plddr` (default), `ocm` (ZG330); see "
          "[runtime-transports.md](runtime-transports.md)",
          doc_manual='`Device::Open("axi://...")` (board) / emulator',
          doc_ours='`Device.open("axi://BOARD?npu=..&dma=..&target=..&file=/dev/mem")` / '
          '`Device.open("grpc://HOST:PORT[/DEVICE]")`'),
        N("xrt.NpuDevice", "reset", "reset", K.SAME,
          "registers to reset values, memories kept; 11012 over `axi://`",
          doc_ours="`npu_device.reset()`"),
        N("xrt.NpuDevice", "", "cycles", K.ADDED,
          "simulated cycle limit and count (emulator; None on a board)",
          doc_ours="`npu_device.wait_irq(timeout_s, max_cycles=None)`, `npu_device.cycles`"),
        N(_DEV, "version", "version", K.SAME,
          "a dict, in the order printed: `target`, `hardware` (what this runtime compiles "
          "for: `rtl/config/npu.toml`), `rtl` (the device's `NPU.HW_VERSION`), `emulator` "
          "(`npu-emu X`, simulated devices only), `runtime`; other devices: what they know",
          doc_manual="`version()`", doc_ours="`device.version()`"),
        N("xrt.NpuDevice", "init", "", K.DIFFERS,
          "opening an NPU device logs (logger `xrt.device`, INFO) its versions, the protocol "
          "(the URL's scheme), the device's name and the URL's parameters (a token hidden), "
          "then resets it; `reset=0` in the URL skips the reset (attaching to a device set "
          "up by something else); a board (`axi://`, whose reset is not mapped) is not reset "
          "unless `reset=1` asks (then 11012), nor a warm server's device (`serve --warm`: "
          "its leases begin from the checkpoint's state)",
          differs="the device's open is its init",
          doc_manual="the device's `init()`: `version()`, `protocol`, `device`, `params`, "
          "`reset(0)`",
          doc_ours='`Device.open(url)` (`"...?reset=0"`)'),
        N(_DEV, "check", "", K.DIFFERS, "device-specific", differs="not provided",
          doc_manual="`check`, `showStatus`, `setWaitTime`", doc_ours="not here"),
    ),
)

_T = "xrt.Tensor"
_TT = "xrt.TensorType"
_DT = "xrt.DataType"

TENSORS = Section(
    "tensors",
    (
        N("xir", "TensorType", "xrt.dtypes.TensorType", K.MODULE,
          "`bytes()`, `numel()`; dtypes `FP32 FP16 BF16 SInt8 UInt8 SInt16 UInt16 SInt32 "
          "UInt32 SInt64 Bool`", doc_manual="`TensorType` (xir)",
          doc_ours='`xrt.TensorType(dtype, shape, layout="*", quant=None)`'),
        N(_TT, "bytes", "bytes", K.SAME, "bytes of the logical tensor"),
        N(_TT, "storageBytes", "bytes", K.SAME, "",
          differs="a type has no hardware layout, so its storage is its logical bytes "
          "(a tensor in a hardware layout: `tensor.nbytes`)",
          doc_manual="`storageBytes()`", doc_ours="`ttype.bytes()`"),
        N("xir", "FloatType", "xrt.dtypes.DataType", K.CLASS,
          "`FloatType.FP32()` is `DataType.FP32` (a data type called gives itself)",
          differs="one enum for every element type: `IntegerType` is the same class",
          doc_ours="`xrt.DataType`"),
        N("xir", "IntegerType", "xrt.dtypes.DataType", K.CLASS,
          "`IntegerType.SInt8()` is `DataType.SINT8`", doc_ours="`xrt.DataType`"),
        N(_DT, "FP32", "FP32", K.SAME, "also `BF16`",
          doc_manual="`FloatType::FP32()`", doc_ours="`DataType.FP32`"),
        N(_DT, "FP16", "FP16", K.SAME, "", doc_manual="`FloatType::FP16()`",
          doc_ours="`DataType.FP16`"),
        N(_DT, "SInt8", "SINT8", K.SAME, "PEP 8 upper case; `DataType.parse` takes either",
          doc_manual="`IntegerType::SInt8()`", doc_ours="`DataType.SINT8`"),
        N(_DT, "UInt8", "UINT8", K.SAME, ""),
        N(_DT, "SInt16", "SINT16", K.SAME, ""),
        N(_DT, "UInt16", "UINT16", K.SAME, ""),
        N(_DT, "SInt32", "SINT32", K.SAME, ""),
        N(_DT, "UInt32", "UINT32", K.SAME, ""),
        N(_DT, "SInt64", "SINT64", K.SAME, ""),
        N(_DT, "Bool", "BOOL", K.SAME, ""),
        N(_DT, "", "FP64", K.ADDED, "host only (ONNX DOUBLE); the NPU refuses it"),
        N(_DT, "", "UINT64", K.ADDED, "host only (ONNX UINT64); the NPU refuses it"),
        N("xir", "Layout", "builtins.str", K.CLASS, '`Layout("NHWC")` is `"NHWC"`',
          differs="a layout is its string", doc_ours="`str`"),
        N("xrt", "Tensor", "xrt.tensor.Tensor", K.MODULE, "a typed view of memory",
          doc_ours="`xrt.Tensor`"),
        N(_T, "Tensor", "", K.FORM, "a tensor without data",
          doc_manual="`Tensor(dtype)`", doc_ours="`Tensor(ttype)`"),
        N(_T, "Tensor", "", K.FORM, "",
          doc_manual="`Tensor(dtype, chunk, offset=0, check_func)`",
          doc_ours="`Tensor(ttype, chunk=None, offset=0, check_func=None, *, hw_layout=None)`"),
        N(_T, "Tensor", "", K.FORM, "a callable second argument is the readiness function",
          doc_manual="`Tensor(ttype, check_func)` (manual 2.6)",
          doc_ours="`Tensor(ttype, check_func)`"),
        N(_T, "Tensor", "from_numpy", K.FORM, "no silent casts (float64 stays FP64)",
          doc_manual="`Tensor(buffer, dtype/layout)`",
          doc_ours="`Tensor.from_numpy(array, *, layout, quant, dtype, region, hw_layout)`"),
        N("xir", "Params", "xrt.tensor.Tensor.from_numpy", K.DIFFERS, "",
          differs="parameters are numpy arrays",
          doc_manual="`Params(ttype).fill<T>(f)`, `Tensor(params)`",
          doc_ours="a numpy array; `Tensor.from_numpy(array)`"),
        N(_T, "dtype", "tensor_type", K.DIFFERS,
          "`dtype` is the element `DataType`; also `shape`, `layout`, `quant`",
          differs="`tensor.dtype` is the element type, as in numpy",
          doc_manual="`dtype()`", doc_ours="`tensor_type`"),
        N(_T, "tensorType", "tensor_type", K.PROPERTY, "", doc_manual="`tensorType()`"),
        N(_T, "data", "data_ptr", K.PROPERTY, "", doc_manual="`data()`"),
        N(_T, "chunk", "chunk", K.ACCESSOR, "a chunk called returns itself"),
        N(_T, "offset", "offset", K.ACCESSOR, ""),
        N(_T, "memRegion", "region", K.PROPERTY, "", doc_manual="`memRegion()`"),
        N(_T, "hasData", "has_data", K.SAME, "",
          doc_manual="`hasData()`", doc_ours="`has_data()`"),
        N(_T, "isOn", "is_on", K.SAME, "", doc_manual="`isOn(region)`", doc_ours="`is_on(region)`"),
        N(_T, "setData", "set_data", K.SAME, "chunks may be shared between tensors",
          doc_manual="`setData(chunk, offset=0)`", doc_ours="`set_data(chunk, offset=0)`"),
        N(_T, "mallocOn", "malloc_on", K.SAME, "replaces any chunk the tensor had",
          doc_manual="`mallocOn(region)`", doc_ours="`malloc_on(region, alignment=None)`"),
        N(_T, "to", "to", K.SAME, "the same tensor when already there, else a ready copy",
          doc_manual="`to(region)`", doc_ours="`to(region)`"),
        N(_T, "fill", "fill", K.SAME,
          "`f(i)` for each flat index, or a constant; values must fit exactly",
          doc_manual="`fill(f)`", doc_ours="`fill(f, *, vectorized=False)`"),
        N(_T, "copyData", "copy_data", K.SAME, "logical layout, exact dtype and shape",
          doc_manual="`copyData(buffer)`", doc_ours="`copy_data(array)`"),
        N(_T, "read", "read", K.SAME, "raw stored bytes",
          doc_ours="`read(dest, offset, nbytes)`"),
        N(_T, "write", "write", K.SAME, "raw stored bytes",
          doc_ours="`write(src, offset, nbytes)`"),
        N(_T, "copyFrom", "copy_from", K.SAME, "raw stored bytes",
          doc_ours="`copy_from(src, *, ...)`"),
        N(_T, "", "numpy", K.ADDED, "`copy=False`: zero-copy view (host-visible regions)",
          doc_ours="`numpy(copy=True, *, hardware=False)`, `np.asarray(tensor)`"),
        N(_T, "isReady", "is_ready", K.SAME, "",
          doc_manual="`isReady()`", doc_ours="`is_ready()`"),
        N(_T, "waitForReady", "wait_for_ready", K.SAME,
          "seconds or `timedelta`; False on timeout",
          doc_manual="`waitForReady(timeout, sleep=0)`",
          doc_ours="`wait_for_ready(timeout, interval=0.0)`"),
        N(_T, "setReady", "set_ready", K.SAME, "",
          doc_manual="`setReady(bool)`", doc_ours="`set_ready(bool)`"),
        N(_T, "setCheckFunc", "set_check_func", K.SAME, "`f(device) -> bool`",
          doc_manual="`setCheckFunc(f)`", doc_ours="`set_check_func(f)`"),
        N(_T, "dump", "dump", K.SAME,
          '`""` (the manual\'s default): the data as stored in memory; else a three-letter '
          "format, see below; returns the format written",
          doc_manual='`dump(os, format="")`',
          doc_ours='`dump(stream_or_path, format="", *, fallback=False)`'),
        N(_T, "setDType", "", K.DIFFERS,
          "make a new `Tensor(ttype, chunk)` over the same chunk instead",
          differs="not provided", doc_manual="`setDType`", doc_ours="not provided"),
        N(_T, "same_as", "", K.DIFFERS, "`tensor.to(region) is tensor` when already there",
          differs="Python's identity", doc_manual="`a.same_as(b)`", doc_ours="`a is b`"),
        N(_T, "", "hw_layout", K.ADDED, "a tensor stored in a hardware layout (see dump)",
          doc_ours="`HwLayout`, `ChannelTiled(block)`"),
    ),
)
# fmt: on
