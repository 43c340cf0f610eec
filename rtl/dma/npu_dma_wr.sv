`default_nettype none

/// DMA write side: walks the destination rows, issues an AXI4 write burst (AW) once the data
/// FIFO holds all of its beats, streams the beats on W (strobes from the realigner) and
/// collects the B responses. Up to `MaxOutstanding` bursts are in flight.
///
/// When stopped (abort or error) it issues no new bursts. A burst is only issued once the
/// FIFO holds all of its beats, and nothing removes FIFO entries before the transfer ends,
/// so every burst already issued still gets every W beat it announced: the bus is never
/// left hanging.
module npu_dma_wr #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned MaxBurstBeats = 256,  /// longest burst
  parameter int unsigned MaxOutstanding = 8,   /// bursts in flight
  parameter int unsigned FifoDepth = 1024,     /// data FIFO entries (beats)
  localparam int unsigned DataWidth = BusBytes * 8,
  localparam int unsigned FifoCountWidth = $clog2(FifoDepth + 1)
) (
  input  wire                       clk_i,          /// clock
  input  wire                       rst_ni,         /// asynchronous reset, active low
  input  wire                       start_i,        /// begin a transfer (one cycle)
  input  wire                       stop_i,         /// issue no further bursts
  input  wire  [AddrWidth-1:0]      dst_i,          /// first destination byte
  input  wire  [31:0]               row_bytes_i,    /// bytes per row (>= 1)
  input  wire  [31:0]               rows_i,         /// rows (>= 1)
  input  wire  [31:0]               dst_stride_i,   /// destination row pitch
  // Data FIFO (first-word fall-through).
  input  wire  [FifoCountWidth-1:0] fifo_count_i,
  input  wire  [DataWidth-1:0]      fifo_data_i,
  input  wire  [BusBytes-1:0]       fifo_strb_i,
  input  wire                       fifo_valid_i,
  output logic                      fifo_ready_o,
  // AXI4 write channels.
  output logic [AddrWidth-1:0]      aw_addr_o,
  output logic [7:0]                aw_len_o,
  output logic                      aw_valid_o,
  input  wire                       aw_ready_i,
  output logic [DataWidth-1:0]      w_data_o,
  output logic [BusBytes-1:0]       w_strb_o,
  output logic                      w_last_o,
  output logic                      w_valid_o,
  input  wire                       w_ready_i,
  input  wire  [1:0]                b_resp_i,
  input  wire                       b_valid_i,
  output logic                      b_ready_o,
  // Events and status.
  output logic                      b_error_o,      /// a B response reported an error
  output logic [BusBytes-1:0]       w_strb_fire_o,  /// strobes of the W beat sent this cycle
  output logic [AddrWidth-1:0]      burst_addr_o,   /// address of the oldest burst awaiting B
  output logic                      busy_o          /// bursts to issue, beats to send or B to collect
);
  localparam int unsigned OutWidth = $clog2(MaxOutstanding + 1);

  logic                 active_q;
  logic [AddrWidth-1:0] row_base_q, cur_q;
  logic [31:0]          rem_q, rows_left_q, row_bytes_q, dst_stride_q;
  logic [OutWidth-1:0]  outstanding_q;   // bursts loaded whose B has not come back
  logic [FifoCountWidth-1:0] committed_q; // FIFO beats promised to loaded bursts, not yet sent

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

  // Burst lengths announced on AW, waiting for their W beats.
  logic [8:0] wq_beats;
  logic       wq_valid, wq_ready, wq_in_ready;

  wire slot_free  = !aw_valid_o || aw_ready_i;
  wire data_ready = (FifoCountWidth+1)'(fifo_count_i) >= (FifoCountWidth+1)'(committed_q)
                                                        + (FifoCountWidth+1)'(plan_beats);
  wire load = active_q && !stop_i && slot_free && data_ready && wq_in_ready
            && (outstanding_q < OutWidth'(MaxOutstanding));

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q     <= 1'b0;
      row_base_q   <= '0;
      cur_q        <= '0;
      rem_q        <= '0;
      rows_left_q  <= '0;
      row_bytes_q  <= '0;
      dst_stride_q <= '0;
      aw_valid_o   <= 1'b0;
      aw_addr_o    <= '0;
      aw_len_o     <= '0;
    end else begin
      if (aw_valid_o && aw_ready_i && !load) aw_valid_o <= 1'b0;
      if (start_i) begin
        active_q     <= 1'b1;
        row_base_q   <= dst_i;
        cur_q        <= dst_i;
        rem_q        <= row_bytes_i;
        rows_left_q  <= rows_i;
        row_bytes_q  <= row_bytes_i;
        dst_stride_q <= dst_stride_i;
      end else if (stop_i) begin
        active_q <= 1'b0;
      end else if (load) begin
        aw_valid_o <= 1'b1;
        aw_addr_o  <= plan_addr;
        aw_len_o   <= 8'(plan_beats - 9'd1);
        if (plan_row_end) begin
          rows_left_q <= rows_left_q - 1'b1;
          if (rows_left_q == 32'd1) active_q <= 1'b0;
          row_base_q <= row_base_q + AddrWidth'(dst_stride_q);
          cur_q      <= row_base_q + AddrWidth'(dst_stride_q);
          rem_q      <= row_bytes_q;
        end else begin
          cur_q <= cur_q + AddrWidth'(plan_take);
          rem_q <= rem_q - plan_take;
        end
      end
    end
  end

  npu_fifo #(.Width(9), .Depth(MaxOutstanding + 1)) u_wq (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(plan_beats), .in_valid_i(load), .in_ready_o(wq_in_ready),
    .out_data_o(wq_beats), .out_valid_o(wq_valid), .out_ready_i(wq_ready),
    .count_o()
  );

  // W: beats of the oldest announced burst, straight from the FIFO.
  logic [8:0] w_beat_q;
  assign w_valid_o    = wq_valid && fifo_valid_i;
  assign w_data_o     = fifo_data_i;
  assign w_strb_o     = fifo_strb_i;
  assign w_last_o     = (w_beat_q + 9'd1) == wq_beats;
  assign fifo_ready_o = wq_valid && w_ready_i && fifo_valid_i;
  wire   w_fire       = w_valid_o && w_ready_i;
  assign wq_ready     = w_fire && w_last_o;
  assign w_strb_fire_o = w_fire ? w_strb_o : '0;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      w_beat_q <= '0;
    end else if (w_fire) begin
      w_beat_q <= w_last_o ? '0 : w_beat_q + 1'b1;
    end
  end

  // B: accepted at once; count and report.
  assign b_ready_o = 1'b1;
  assign b_error_o = b_valid_i && b_resp_i[1];
  logic unused;
  assign unused = b_resp_i[0];  // EXOKAY/OKAY alike

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      outstanding_q <= '0;
      committed_q   <= '0;
    end else begin
      outstanding_q <= outstanding_q + OutWidth'(load) - OutWidth'(b_valid_i);
      committed_q   <= committed_q + (load ? FifoCountWidth'(plan_beats) : '0)
                     - FifoCountWidth'(fifo_ready_o);
    end
  end

  npu_fifo #(
    .Width(AddrWidth), .Depth(MaxOutstanding + 1), .MustAccept(1'b1), .MustHold(1'b1)
  ) u_addr_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(plan_addr), .in_valid_i(load), .in_ready_o(),
    .out_data_o(burst_addr_o), .out_valid_o(), .out_ready_i(b_valid_i),
    .count_o()
  );

  assign busy_o = active_q || aw_valid_o || wq_valid || outstanding_q != '0;
endmodule

`default_nettype wire
