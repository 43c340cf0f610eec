`default_nettype none

/// DPI-C entry points of the register bus master's command queue (npu_regbus_dpi.cpp).
///
/// The harness queues a whole batch of register operations from Python in one call, then
/// toggles the master's kick input; the master takes the operations one by one with
/// `npu_regbus_next` and reports each result with `npu_regbus_done`, without returning to
/// Python between bus transactions. The queue stops handing out operations after the
/// first result that is not OK (the batch semantics of the device server).
package npu_regbus_dpi_pkg;
  /// Operation kinds, as the queue stores them.
  typedef enum logic [1:0] {
    OpRead        = 2'd0,  /// read `addr`
    OpWrite       = 2'd1,  /// write `value` to `addr`
    OpMaskedWrite = 2'd2,  /// read-modify-write: bits under `mask` become those of `value`
    OpPoll        = 2'd3   /// read `addr` until `data & mask == expected`, within `max_cycles`
  } regbus_op_e;

  /// Take the next operation of the batch; 0 when the batch is finished (all done, or a
  /// failure stopped it).
  import "DPI-C" function bit npu_regbus_next(
    output int unsigned kind, output int unsigned addr, output int unsigned value,
    output int unsigned mask, output int unsigned expected,
    output longint unsigned max_cycles);

  /// The harness gave up on the batch (its caller went away): a poll stops waiting.
  import "DPI-C" function bit npu_regbus_cancelled();

  /// Report the result of the operation last taken: its status (the wire's
  /// RegisterStatus, npu_wire_pkg), the value (read, polled, or written by a masked write),
  /// the simulated cycles it took, and whether it failed (the batch stops there).
  import "DPI-C" function void npu_regbus_done(
    input int unsigned status, input int unsigned value, input longint unsigned cycles,
    input bit failed);
endpackage

`default_nettype wire
