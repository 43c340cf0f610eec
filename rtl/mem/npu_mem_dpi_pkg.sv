`default_nettype none

/// DPI-C entry points of the shared-memory storage behind the DDR models
/// (implemented in npu_mem_dpi.cpp). Data vectors are 1024 bits wide, the widest beat the
/// models support; a model passes how many bytes of them count.
package npu_mem_dpi_pkg;
  /// Map `size` bytes of the file at `path` (created sparse if missing, grown if short);
  /// an empty path gives private anonymous memory. `name` is only for messages. Returns a
  /// small handle (an index, not a pointer: the models' state is saved in checkpoints and
  /// restored into another process, where a pointer would mean nothing; the memories are
  /// opened in the same order in every process of one model).
  import "DPI-C" function int unsigned npu_mem_open(
    input string name, input string path, input longint unsigned size);

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
