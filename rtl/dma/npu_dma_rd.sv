`default_nettype none

/// DMA read side: walks the source rows, issues AXI4 read bursts (AR) and tells the
/// realigner about each row. R data goes straight to the realigner (`npu_dma_align`).
///
/// A burst is issued only when the data FIFO has room reserved for everything it and the
/// bursts before it can produce, so R is never back-pressured for lack of space in steady
/// state, and up to `MaxOutstanding` bursts are in flight.
module npu_dma_rd #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned MaxBurstBeats = 256,  /// longest burst
  parameter int unsigned MaxOutstanding = 8,   /// bursts in flight
  parameter int unsigned FifoDepth = 1024,     /// data FIFO entries (beats)
  localparam int unsigned OffWidth = $clog2(BusBytes),
  localparam int unsigned FifoCountWidth = $clog2(FifoDepth + 1)
) (
  input  wire                      clk_i,           /// clock
  input  wire                      rst_ni,          /// asynchronous reset, active low
  // Transfer, sampled on start_i.
  input  wire                      start_i,         /// begin a transfer (one cycle)
  input  wire                      stop_i,          /// issue no further bursts
  input  wire  [AddrWidth-1:0]     src_i,           /// first source byte
  input  wire  [OffWidth-1:0]      dst_off_i,       /// first destination byte, low bits
  input  wire  [31:0]              row_bytes_i,     /// bytes per row (>= 1)
  input  wire  [31:0]              rows_i,          /// rows (>= 1)
  input  wire  [31:0]              src_stride_i,    /// source row pitch
  input  wire  [OffWidth-1:0]      dst_stride_i,    /// destination row pitch, low bits
  // Data FIFO occupancy, for credit.
  input  wire  [FifoCountWidth-1:0] fifo_count_i,   /// entries in the data FIFO
  // AXI4 read address channel.
  output logic [AddrWidth-1:0]     ar_addr_o,
  output logic [7:0]               ar_len_o,
  output logic                     ar_valid_o,
  input  wire                      ar_ready_i,
  // R handshakes as seen by the realigner (for credit and outstanding counts).
  input  wire                      r_fire_i,        /// an R beat was accepted
  input  wire                      r_last_i,        /// ... and it was the last of its burst
  // Row descriptors to the realigner.
  output logic                     row_valid_o,
  input  wire                      row_ready_i,
  output logic [OffWidth-1:0]      row_src_off_o,   /// source offset of the row's first byte
  output logic [OffWidth-1:0]      row_dst_off_o,   /// destination offset of the row's first byte
  output logic [31:0]              row_bytes_o,     /// bytes in the row
  // Status.
  output logic [AddrWidth-1:0]     burst_addr_o,    /// address of the oldest burst in flight
  output logic                     busy_o           /// bursts to issue or in flight
);
  localparam int unsigned OutWidth = $clog2(MaxOutstanding + 1);
  localparam int unsigned ResWidth = FifoCountWidth + 1;
  // Entries kept free beyond the reservation: the realigner's flush beat of a row may
  // arrive in the cycle after the reservation of the row's last burst was released.
  localparam int unsigned Slack = 2;

  initial begin
    // Room for one burst in flight on each side, so neither can starve the other.
    if (FifoDepth < 2 * MaxBurstBeats + Slack + 1)
      $fatal(1, "npu_dma_rd: FifoDepth %0d must be at least 2 * MaxBurstBeats %0d + %0d",
             FifoDepth, MaxBurstBeats, Slack + 1);
  end

  // Row walk state.
  logic                 active_q;        // rows left to issue
  logic                 new_row_q;       // next burst starts a row
  logic [AddrWidth-1:0] row_base_q;      // first byte of the current row
  logic [AddrWidth-1:0] cur_q;           // next byte to cover
  logic [31:0]          rem_q;           // bytes of the row not yet covered
  logic [31:0]          rows_left_q;     // rows not finished, including the current one
  logic [OffWidth-1:0]  dst_off_q;       // destination offset of the current row
  logic [31:0]          row_bytes_q, src_stride_q;
  logic [OffWidth-1:0]  dst_stride_q;    // only the offset within a beat matters here

  // In-flight accounting.
  logic [OutWidth-1:0]  outstanding_q;   // bursts loaded and not yet completed (rlast)
  logic [ResWidth-1:0]  reserved_q;      // FIFO entries reserved for data not yet arrived

  logic [AddrWidth-1:0] plan_addr;
  logic [8:0]           plan_beats;
  logic [31:0]          plan_take;
  logic                 plan_row_end;

  npu_dma_burst_plan #(
    .BusBytes(BusBytes), .MaxBurstBeats(MaxBurstBeats), .AddrWidth(AddrWidth)
  ) u_plan (
    .cur_i(cur_q), .rem_i(rem_q),
    .addr_o(plan_addr), .beats_o(plan_beats), .take_o(plan_take), .row_end_o(plan_row_end)
  );

  // A burst reserves its beats plus one: the realigner may emit one more beat than it
  // receives at the end of a row.
  wire [ResWidth:0] need = (ResWidth+1)'(reserved_q) + (ResWidth+1)'(fifo_count_i)
                         + (ResWidth+1)'(plan_beats) + 1'b1;
  wire credit_ok = need <= (ResWidth+1)'(FifoDepth - Slack);
  wire slot_free = !ar_valid_o || ar_ready_i;
  wire load = active_q && !stop_i && slot_free && credit_ok
            && (outstanding_q < OutWidth'(MaxOutstanding))
            && (!new_row_q || row_ready_i);

  assign row_valid_o   = active_q && !stop_i && new_row_q && slot_free && credit_ok
                       && (outstanding_q < OutWidth'(MaxOutstanding));
  assign row_src_off_o = cur_q[OffWidth-1:0];
  assign row_dst_off_o = dst_off_q;
  assign row_bytes_o   = row_bytes_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q     <= 1'b0;
      new_row_q    <= 1'b0;
      row_base_q   <= '0;
      cur_q        <= '0;
      rem_q        <= '0;
      rows_left_q  <= '0;
      dst_off_q    <= '0;
      row_bytes_q  <= '0;
      src_stride_q <= '0;
      dst_stride_q <= '0;
      ar_valid_o   <= 1'b0;
      ar_addr_o    <= '0;
      ar_len_o     <= '0;
    end else begin
      if (ar_valid_o && ar_ready_i && !load) ar_valid_o <= 1'b0;
      if (start_i) begin
        active_q     <= 1'b1;
        new_row_q    <= 1'b1;
        row_base_q   <= src_i;
        cur_q        <= src_i;
        rem_q        <= row_bytes_i;
        rows_left_q  <= rows_i;
        dst_off_q    <= dst_off_i;
        row_bytes_q  <= row_bytes_i;
        src_stride_q <= src_stride_i;
        dst_stride_q <= dst_stride_i;
      end else if (stop_i) begin
        active_q <= 1'b0;
      end else if (load) begin
        ar_valid_o <= 1'b1;
        ar_addr_o  <= plan_addr;
        ar_len_o   <= 8'(plan_beats - 9'd1);
        new_row_q  <= plan_row_end;
        if (plan_row_end) begin
          rows_left_q <= rows_left_q - 1'b1;
          if (rows_left_q == 32'd1) active_q <= 1'b0;
          row_base_q <= row_base_q + AddrWidth'(src_stride_q);
          cur_q      <= row_base_q + AddrWidth'(src_stride_q);
          rem_q      <= row_bytes_q;
          dst_off_q  <= dst_off_q + dst_stride_q;
        end else begin
          cur_q <= cur_q + AddrWidth'(plan_take);
          rem_q <= rem_q - plan_take;
        end
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      outstanding_q <= '0;
      reserved_q    <= '0;
    end else begin
      outstanding_q <= outstanding_q + OutWidth'(load) - OutWidth'(r_fire_i && r_last_i);
      reserved_q    <= reserved_q
                     + (load ? ResWidth'(plan_beats) + 1'b1 : '0)
                     - ResWidth'(r_fire_i)
                     - ResWidth'(r_fire_i && r_last_i);
    end
  end

  // Addresses of the bursts in flight, oldest first: names the burst an error came from.
  npu_fifo #(
    .Width(AddrWidth), .Depth(MaxOutstanding + 1), .MustAccept(1'b1), .MustHold(1'b1)
  ) u_addr_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(plan_addr), .in_valid_i(load), .in_ready_o(),
    .out_data_o(burst_addr_o), .out_valid_o(), .out_ready_i(r_fire_i && r_last_i),
    .count_o()
  );

  assign busy_o = active_q || outstanding_q != '0 || ar_valid_o;
endmodule

`default_nettype wire
