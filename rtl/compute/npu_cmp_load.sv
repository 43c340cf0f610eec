`default_nettype none

/// LOAD unit: reads a strided 3-D tile (`npu_cmp_walker` cuts it into bursts) and writes
/// it into consecutive rows of a buffer, inserting the padding rows of the instruction
/// on the fly. The instruction was checked by the decoder (sizes, alignment, memory
/// window, buffer rows) before it got here. Read data arrives in order (one AXI ID).
///
/// After `stop_i` no burst is requested; R beats of bursts in flight are taken and
/// dropped; `drained_o` says when none is left.
module npu_cmp_load #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat (= block B)
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned MaxBurstBeats = 256,  /// longest burst
  parameter int unsigned MaxOutstanding = 8,   /// bursts in flight
  localparam int unsigned DataWidth = BusBytes * 8,
  localparam int unsigned RowWidth = BusBytes * DataWidth   // widest row: a weight block
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  input  wire                  clear_i,        /// abandon everything (engine idle)
  input  wire                  stop_i,         /// issue nothing new (error or abort)
  input  wire                  start_i,        /// run `insn_i` (one cycle)
  input  npu_isa_pkg::load_insn_t insn_i,      /// the LOAD
  input  wire  [63:0]          addr_i,         /// BASE[base] + offset of `insn_i`
  output logic                 done_o,         /// the started LOAD wrote every row
  // Read requests (to the read arbiter) and data (R beats of this unit's ID).
  output logic                 ar_valid_o,
  input  wire                  ar_ready_i,
  output logic [AddrWidth-1:0] ar_addr_o,
  output logic [7:0]           ar_len_o,
  input  wire                  r_valid_i,
  output logic                 r_ready_o,
  input  wire  [DataWidth-1:0] r_data_i,
  input  wire  [1:0]           r_resp_i,
  input  wire                  r_last_i,
  // Buffer writes (registered): one row per cycle at most.
  output logic                 wr_valid_o,     /// write `wr_data_o` into `wr_buf_o` row `wr_row_o`
  output npu_isa_pkg::buffer_e wr_buf_o,
  output logic [15:0]          wr_row_o,
  output logic [RowWidth-1:0]  wr_data_o,
  // Errors and status.
  output logic                 err_o,          /// a read beat answered an error (one cycle)
  output npu_isa_pkg::err_e    err_code_o,     /// LOAD_SLVERR or LOAD_DECERR
  output logic [63:0]          err_addr_o,     /// address of the failing burst
  output logic                 beat_o,         /// a read beat arrived (counters)
  output logic                 drained_o       /// no burst requested or in flight
);
  import npu_isa_pkg::*;

  localparam int unsigned OutWidth = $clog2(MaxOutstanding + 1);

  // ---------------------------------------------------------------- burst requests
  logic                 w_valid, w_active;
  logic [AddrWidth-1:0] w_addr;
  logic [8:0]           w_beats;
  logic [OutWidth-1:0]  outstanding_q;
  logic [4:0]           elem_beats;

  always_comb begin
    unique case (insn_i.buffer)
      BufferWgt:            elem_beats = 5'(BusBytes);
      BufferAcc, BufferPrm: elem_beats = 5'd4;
      default:              elem_beats = 5'd1;
    endcase
  end

  wire room = outstanding_q < OutWidth'(MaxOutstanding);
  assign ar_valid_o = w_valid && room && !stop_i;
  assign ar_addr_o  = w_addr;
  assign ar_len_o   = 8'(w_beats - 9'd1);
  wire ar_fire = ar_valid_o && ar_ready_i;
  wire r_fire  = r_valid_i && r_ready_o;

  npu_cmp_walker #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .MaxBurstBeats(MaxBurstBeats)
  ) u_walker (
    .clk_i, .rst_ni, .clear_i(clear_i), .start_i,
    .addr_i(AddrWidth'(addr_i)), .x_size_i(insn_i.x_size), .y_size_i(insn_i.y_size),
    .z_size_i(insn_i.z_size), .x_stride_i(insn_i.x_stride), .y_stride_i(insn_i.y_stride),
    .z_stride_i(insn_i.z_stride), .elem_beats_i(elem_beats),
    .burst_valid_o(w_valid), .burst_ready_i(ar_fire), .burst_addr_o(w_addr),
    .burst_beats_o(w_beats), .active_o(w_active)
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) outstanding_q <= '0;
    else outstanding_q <= outstanding_q + OutWidth'(ar_fire) - OutWidth'(r_fire && r_last_i);
  end

  // Burst addresses in flight, oldest first, to name the burst a read error came from.
  logic [AddrWidth-1:0] oldest_addr;
  npu_fifo #(
    .Width(AddrWidth), .Depth(MaxOutstanding + 1), .MustAccept(1'b1), .MustHold(1'b1)
  ) u_addr_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(w_addr), .in_valid_i(ar_fire), .in_ready_o(),
    .out_data_o(oldest_addr), .out_valid_o(), .out_ready_i(r_fire && r_last_i),
    .count_o()
  );

  // ---------------------------------------------------------------- row writer
  logic        active_q;              // rows left to write
  logic [31:0] rows_left_q;
  logic [10:0] px_q, py_q, pw_q, ph_q;
  logic [4:0]  beat_q;
  logic [4:0]  eb_q;
  logic        err_seen_q;            // report only the first read error of a run
  load_insn_t  l_q;                   // the running LOAD

  wire is_data = py_q >= 11'(l_q.pad_top) && py_q < 11'(l_q.pad_top) + 11'(l_q.y_size)
              && px_q >= 11'(l_q.pad_left) && px_q < 11'(l_q.pad_left) + 11'(l_q.x_size);
  wire writing = active_q && !stop_i;
  assign r_ready_o = stop_i || (writing && is_data);
  wire row_done = writing && (!is_data || (r_fire && beat_q == eb_q - 5'd1));

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q    <= 1'b0;
      rows_left_q <= '0;
      {px_q, py_q, pw_q, ph_q} <= '0;
      beat_q      <= '0;
      eb_q        <= 5'd1;
      l_q         <= '0;
      wr_valid_o  <= 1'b0;
      wr_row_o    <= '0;
      wr_buf_o    <= BufferInp;
    end else if (clear_i) begin
      active_q   <= 1'b0;
      wr_valid_o <= 1'b0;
    end else begin
      wr_valid_o <= 1'b0;
      if (start_i) begin
        l_q      <= insn_i;
        active_q <= 1'b1;
        pw_q     <= 11'(insn_i.pad_left) + 11'(insn_i.x_size) + 11'(insn_i.pad_right);
        ph_q     <= 11'(insn_i.pad_top) + 11'(insn_i.y_size) + 11'(insn_i.pad_bottom);
        rows_left_q <= 32'(insn_i.z_size)
                     * (32'(insn_i.pad_top) + 32'(insn_i.y_size) + 32'(insn_i.pad_bottom))
                     * (32'(insn_i.pad_left) + 32'(insn_i.x_size) + 32'(insn_i.pad_right));
        {px_q, py_q} <= '0;
        beat_q   <= '0;
        eb_q     <= elem_beats;
        wr_buf_o <= insn_i.buffer;
        wr_row_o <= insn_i.sram - 16'd1;  // the first write adds one
      end else if (writing) begin
        if (is_data && r_fire) beat_q <= beat_q + 5'd1;
        if (row_done) begin
          beat_q     <= '0;
          wr_valid_o <= 1'b1;
          wr_row_o   <= wr_row_o + 16'd1;
          rows_left_q <= rows_left_q - 32'd1;
          if (rows_left_q == 32'd1) active_q <= 1'b0;
          if (px_q + 11'd1 == pw_q) begin
            px_q <= '0;
            py_q <= (py_q + 11'd1 == ph_q) ? 11'd0 : py_q + 11'd1;
          end else begin
            px_q <= px_q + 11'd1;
          end
        end
      end
    end
  end

  // Row assembly: beat k of an element is bits [k*DataWidth +: DataWidth] of the row.
  always_ff @(posedge clk_i) begin
    if (writing) begin
      if (!is_data) wr_data_o[DataWidth-1:0] <= l_q.pad_min ? {BusBytes{8'h80}} : '0;
      else if (r_fire) wr_data_o[beat_q[3:0] * DataWidth +: DataWidth] <= r_data_i;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) err_seen_q <= 1'b0;
    else if (start_i && !stop_i) err_seen_q <= 1'b0;
    else if (err_o) err_seen_q <= 1'b1;
  end
  assign err_o      = r_fire && r_resp_i[1] && !err_seen_q && !clear_i;
  assign err_code_o = r_resp_i[0] ? ErrLoadDecerr : ErrLoadSlverr;
  assign err_addr_o = 64'(oldest_addr);
  assign beat_o     = r_fire;

  assign done_o    = !active_q && !wr_valid_o && !w_active;
  assign drained_o = outstanding_q == '0;

  logic unused;
  assign unused = ^{addr_i[63:AddrWidth], l_q.opcode, l_q.sram, l_q.offset, l_q.base,
                    l_q.buffer, l_q.z_size, l_q.pad_bottom, l_q.pad_right, l_q.x_stride,
                    l_q.y_stride, l_q.z_stride, l_q.rsvd_184, l_q.rsvd_94, l_q.push_next,
                    l_q.push_prev, l_q.pop_next, l_q.pop_prev};
endmodule

`default_nettype wire
