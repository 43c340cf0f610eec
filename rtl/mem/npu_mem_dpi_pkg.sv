`default_nettype none

/// DPI-C entry points of the shared-memory storage behind the DDR models
/// (implemented in npu_mem_dpi.cpp). Data vectors are 1024 bits wide, the widest beat the
/// models support; a model passes how many bytes of them count.
package npu_mem_dpi_pkg;
  /// Open the storage of memory `name` in table slot `slot`: `size` bytes of the file the
  /// plusarg `+npu_mem_<name>=PATH` names (created sparse if missing, grown if short), or
  /// private anonymous memory without one. The slot is the model's `DpiSlot` parameter, a
  /// constant: nothing of it is in the model's saved state (checkpoints), so a restored
  /// state cannot point a model at another memory; the C side checks every slot anyway.
  import "DPI-C" function void npu_mem_open(
    input int unsigned slot, input string name, input longint unsigned size);

  /// Copy `nbytes` bytes from `offset` into `data` (byte 0 in bits 7:0).
  import "DPI-C" function void npu_mem_read(
    input int unsigned mem, input longint unsigned offset, input int unsigned nbytes,
    output bit [1023:0] data);

  /// Write the bytes of `data` whose bit is set in `strb`, of the `nbytes` at `offset`.
  import "DPI-C" function void npu_mem_write(
    input int unsigned mem, input longint unsigned offset, input int unsigned nbytes,
    input bit [1023:0] data, input bit [127:0] strb);
endpackage

`default_nettype wire
