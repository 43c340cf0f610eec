`default_nettype none

/// Splits the rest of a row into the next AXI4 INCR burst (combinational).
///
/// The burst starts at the beat holding `cur_i`, never crosses a 4 KiB boundary, has at
/// most `MaxBurstBeats` beats and covers `take_o` bytes of the row: as many as fit.
module npu_dma_burst_plan #(
  /// Bytes per data beat (power of two, 8..128).
  parameter int unsigned BusBytes = 16,
  /// Longest burst in beats (1..256).
  parameter int unsigned MaxBurstBeats = 256,
  /// Address bits.
  parameter int unsigned AddrWidth = 40,
  localparam int unsigned OffWidth = $clog2(BusBytes)
) (
  input  wire  [AddrWidth-1:0] cur_i,     /// next byte address of the row
  input  wire  [31:0]          rem_i,     /// bytes of the row still to cover (>= 1)
  output logic [AddrWidth-1:0] addr_o,    /// burst address (aligned to the beat)
  output logic [8:0]           beats_o,   /// beats in the burst (1..MaxBurstBeats)
  output logic [31:0]          take_o,    /// row bytes this burst covers
  output logic                 row_end_o  /// the burst covers the rest of the row
);
  initial begin
    if (BusBytes < 8 || BusBytes > 128 || (BusBytes & (BusBytes - 1)) != 0)
      $fatal(1, "npu_dma_burst_plan: BusBytes must be a power of two in 8..128, got %0d", BusBytes);
    if (MaxBurstBeats < 1 || MaxBurstBeats > 256)
      $fatal(1, "npu_dma_burst_plan: MaxBurstBeats must be 1..256, got %0d", MaxBurstBeats);
  end

  logic [OffWidth-1:0] off;
  logic [12:0] page_beats;   // beats left before the next 4 KiB boundary (1..4096/BusBytes)
  logic [12:0] max_beats;
  logic [32:0] room;         // row bytes the longest legal burst can cover

  always_comb begin
    off        = cur_i[OffWidth-1:0];
    addr_o     = {cur_i[AddrWidth-1:OffWidth], {OffWidth{1'b0}}};
    page_beats = 13'((13'h1000 - {1'b0, addr_o[11:0]}) >> OffWidth);
    max_beats  = (page_beats < 13'(MaxBurstBeats)) ? page_beats : 13'(MaxBurstBeats);
    room       = 33'(max_beats) * 33'(BusBytes) - 33'(off);
    if ({1'b0, rem_i} <= room) begin
      take_o    = rem_i;
      row_end_o = 1'b1;
    end else begin
      take_o    = room[31:0];
      row_end_o = 1'b0;
    end
    beats_o = 9'((33'(off) + 33'(take_o) + 33'(BusBytes - 1)) >> OffWidth);
  end
endmodule

`default_nettype wire
