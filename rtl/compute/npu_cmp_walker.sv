`default_nettype none

/// Cuts a 3-D strided tile of elements in memory into AXI4 INCR bursts, in element order
/// (x fastest, then y, then z). Elements are `ElemBeats` whole beats at beat-aligned
/// addresses. When `x_stride` equals the element size a row is one contiguous run;
/// otherwise each element is its own run. Bursts never cross 4 KiB and have at most
/// `MaxBurstBeats` beats. Used by LOAD (reads) and STORE (writes).
module npu_cmp_walker #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned MaxBurstBeats = 256   /// longest burst (1..256)
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  input  wire                  clear_i,        /// abandon the tile
  input  wire                  start_i,        /// begin a tile (sampled with the fields below)
  input  wire  [AddrWidth-1:0] addr_i,         /// first element's address (beat-aligned)
  input  wire  [9:0]           x_size_i,       /// elements per row (>= 1)
  input  wire  [9:0]           y_size_i,       /// rows per plane (>= 1)
  input  wire  [9:0]           z_size_i,       /// planes (>= 1)
  input  wire  [15:0]          x_stride_i,     /// bytes between elements of a row
  input  wire  [27:0]          y_stride_i,     /// bytes between rows
  input  wire  [27:0]          z_stride_i,     /// bytes between planes
  input  wire  [4:0]           elem_beats_i,   /// beats per element (1..16)
  output logic                 burst_valid_o,  /// a burst is ready
  input  wire                  burst_ready_i,  /// ... and is taken
  output logic [AddrWidth-1:0] burst_addr_o,   /// its address
  output logic [8:0]           burst_beats_o,  /// its length in beats
  output logic                 active_o        /// bursts remain to be handed out
);
  localparam int unsigned OffWidth = $clog2(BusBytes);
  localparam int unsigned PageBeats = 4096 / BusBytes;

  logic [9:0]           x_q, y_q, z_q;
  logic [AddrWidth-1:0] plane_q, row_q, elem_q, cur_q;
  logic [14:0]          seg_left_q;   // beats left in the current run
  logic                 contig_q;
  logic [9:0]           xs_q, ys_q, zs_q;
  logic [15:0]          x_stride_q;
  logic [27:0]          y_stride_q, z_stride_q;
  logic [4:0]           eb_q;

  logic [12:0] page_left;
  logic [14:0] beats;
  always_comb begin
    page_left = 13'(PageBeats) - 13'(cur_q[11:OffWidth]);
    beats = seg_left_q;
    if (15'(page_left) < beats) beats = 15'(page_left);
    if (15'(MaxBurstBeats) < beats) beats = 15'(MaxBurstBeats);
  end

  assign burst_valid_o = active_o;
  assign burst_addr_o  = cur_q;
  assign burst_beats_o = 9'(beats);

  wire [14:0] row_beats = contig_q ? 15'(xs_q) * 15'(eb_q) : 15'(eb_q);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_o <= 1'b0;
      {x_q, y_q, z_q} <= '0;
      {plane_q, row_q, elem_q, cur_q} <= '0;
      seg_left_q <= '0;
      contig_q <= 1'b0;
      {xs_q, ys_q, zs_q} <= '0;
      x_stride_q <= '0;
      {y_stride_q, z_stride_q} <= '0;
      eb_q <= '0;
    end else if (clear_i) begin
      active_o <= 1'b0;
    end else if (start_i) begin
      active_o   <= 1'b1;
      {x_q, y_q, z_q} <= '0;
      plane_q    <= addr_i;
      row_q      <= addr_i;
      elem_q     <= addr_i;
      cur_q      <= addr_i;
      contig_q   <= 32'(x_stride_i) == 32'(elem_beats_i) * BusBytes;
      seg_left_q <= (32'(x_stride_i) == 32'(elem_beats_i) * BusBytes)
                    ? 15'(x_size_i) * 15'(elem_beats_i) : 15'(elem_beats_i);
      xs_q <= x_size_i;
      ys_q <= y_size_i;
      zs_q <= z_size_i;
      x_stride_q <= x_stride_i;
      y_stride_q <= y_stride_i;
      z_stride_q <= z_stride_i;
      eb_q <= elem_beats_i;
    end else if (burst_valid_o && burst_ready_i) begin
      if (seg_left_q != beats) begin
        cur_q      <= cur_q + AddrWidth'(beats) * AddrWidth'(BusBytes);
        seg_left_q <= seg_left_q - beats;
      end else if (!contig_q && x_q + 10'd1 != xs_q) begin
        x_q        <= x_q + 10'd1;
        elem_q     <= elem_q + AddrWidth'(x_stride_q);
        cur_q      <= elem_q + AddrWidth'(x_stride_q);
        seg_left_q <= row_beats;
      end else if (y_q + 10'd1 != ys_q) begin
        x_q        <= '0;
        y_q        <= y_q + 10'd1;
        row_q      <= row_q + AddrWidth'(y_stride_q);
        elem_q     <= row_q + AddrWidth'(y_stride_q);
        cur_q      <= row_q + AddrWidth'(y_stride_q);
        seg_left_q <= row_beats;
      end else if (z_q + 10'd1 != zs_q) begin
        x_q        <= '0;
        y_q        <= '0;
        z_q        <= z_q + 10'd1;
        plane_q    <= plane_q + AddrWidth'(z_stride_q);
        row_q      <= plane_q + AddrWidth'(z_stride_q);
        elem_q     <= plane_q + AddrWidth'(z_stride_q);
        cur_q      <= plane_q + AddrWidth'(z_stride_q);
        seg_left_q <= row_beats;
      end else begin
        active_o <= 1'b0;
      end
    end
  end
endmodule

`default_nettype wire
