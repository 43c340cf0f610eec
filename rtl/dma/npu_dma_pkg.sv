`default_nettype none

/// Types and constants shared by the DMA engine's modules.
package npu_dma_pkg;
  /// STATUS.ERR_CODE values (documented in rtl/regs/dma.rdl).
  typedef enum logic [3:0] {
    ErrNone       = 4'd0,
    ErrZeroLength = 4'd1,
    ErrSrcRange   = 4'd2,
    ErrDstRange   = 4'd3,
    ErrReadSlverr = 4'd4,
    ErrReadDecerr = 4'd5,
    ErrWriteSlverr = 4'd6,
    ErrWriteDecerr = 4'd7,
    ErrAborted    = 4'd8
  } err_code_e;

  /// AXI response code DECERR (SLVERR is 2'b10; bit 1 set means an error).
  localparam logic [1:0] RespDecerr = 2'b11;

  localparam logic [1:0] BurstIncr = 2'b01;
endpackage

`default_nettype wire
