`default_nettype none

/// On-chip buffer: one array, `NumWrite` write ports and `NumRead` registered read ports.
/// A read and a write of the same row at the same edge return the old row (the compute
/// unit forwards around that). Writes of two ports to one row at one edge are a program
/// race the golden model rejects; the higher port wins here. The wipe port zeroes one row
/// per cycle (rows at or past `Depth` are ignored, so one row counter wipes buffers of any
/// depth) and wins over the write ports.
module npu_cmp_sram #(
  parameter int unsigned Width = 128,    /// bits per row
  parameter int unsigned Depth = 256,    /// rows
  parameter int unsigned NumRead = 1,    /// read ports
  parameter int unsigned NumWrite = 1,   /// write ports
  localparam int unsigned AddrWidth = $clog2(Depth)
) (
  input  wire                                 clk_i,    /// clock
  input  wire  [NumWrite-1:0]                 we_i,     /// write enable per port
  input  wire  [NumWrite-1:0][15:0]           waddr_i,  /// write row per port (ISA row field; low bits used)
  input  wire  [NumWrite-1:0][Width-1:0]      wdata_i,  /// write data per port
  input  wire  [NumRead-1:0]                  re_i,     /// read enable per port
  input  wire  [NumRead-1:0][15:0]            raddr_i,  /// read row per port (low bits used)
  output logic [NumRead-1:0][Width-1:0]       rdata_o,  /// row read at the last enabled edge
  input  wire                                 wipe_i,   /// zero row `wipe_row_i`
  input  wire  [16:0]                         wipe_row_i /// the row to zero (>= Depth: none)
);
  initial begin
    if (Depth < 2 || Depth > 65536 || (Depth & (Depth - 1)) != 0)
      $fatal(1, "npu_cmp_sram: Depth must be a power of two in 2..65536, got %0d", Depth);
  end

  logic [Width-1:0] mem_q [Depth];

  // No reset: buffers hold whatever the last program left, as SRAMs do, until the owner
  // wipes them row by row (npu_cmp_core wipes every buffer after reset).
  always_ff @(posedge clk_i) begin
    for (int p = 0; p < NumRead; p++) begin
      if (re_i[p]) rdata_o[p] <= mem_q[raddr_i[p][AddrWidth-1:0]];
    end
    for (int p = 0; p < NumWrite; p++) begin
      if (we_i[p]) mem_q[waddr_i[p][AddrWidth-1:0]] <= wdata_i[p];
    end
    if (wipe_i && 32'(wipe_row_i) < Depth) mem_q[wipe_row_i[AddrWidth-1:0]] <= '0;
  end
endmodule

`default_nettype wire
