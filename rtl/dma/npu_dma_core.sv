`default_nettype none
`include "npu_assert.svh"

/// DMA engine core: checks a programmed transfer, runs the read side, the realigner and the
/// write side, and reports the outcome. Register-agnostic: `npu_dma` connects it to the CSRs.
///
/// Transfer life: START -> check (zero length, source and destination each inside one
/// memory window) -> run (bursts) -> finish (status, one DONE or ERROR event). An error
/// response or ABORT stops new bursts; bursts in flight complete before the transfer ends.
module npu_dma_core
  import npu_dma_pkg::*;
#(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned MaxBurstBeats = 256,  /// longest burst
  parameter int unsigned MaxOutstanding = 8,   /// bursts in flight per direction
  parameter int unsigned FifoDepth = 1024,     /// data FIFO entries (beats)
  /// Memory windows the DMA may touch: [base, base + size); size 0 = absent.
  parameter logic [63:0] Mem0Base = 64'h0,
  parameter logic [63:0] Mem0Size = 64'h0,
  parameter logic [63:0] Mem1Base = 64'h0,
  parameter logic [63:0] Mem1Size = 64'h0,
  parameter logic [63:0] Mem2Base = 64'h0,
  parameter logic [63:0] Mem2Size = 64'h0,
  parameter type req_t = logic,                /// AXI4 request (npu_axi_typedef.svh)
  parameter type rsp_t = logic,                /// AXI4 response
  localparam int unsigned DataWidth = BusBytes * 8,
  localparam int unsigned OffWidth = $clog2(BusBytes)
) (
  input  wire                  clk_i,           /// clock
  input  wire                  rst_ni,          /// asynchronous reset, active low
  // Programming (from the CSRs).
  input  wire                  start_i,         /// START pulse
  input  wire                  abort_i,         /// ABORT pulse
  input  wire  [63:0]          src_i,           /// SRC_HI:SRC_LO
  input  wire  [63:0]          dst_i,           /// DST_HI:DST_LO
  input  wire  [31:0]          row_bytes_i,     /// ROW_BYTES
  input  wire  [31:0]          rows_i,          /// ROWS
  input  wire  [31:0]          src_stride_i,    /// SRC_STRIDE
  input  wire  [31:0]          dst_stride_i,    /// DST_STRIDE
  input  wire                  perf_clear_i,    /// PERF_CTRL.CLEAR pulse
  // Outcome.
  output logic                 busy_o,          /// a transfer is running
  output logic                 done_o,          /// last transfer succeeded
  output logic                 error_o,         /// last transfer failed
  output err_code_e            err_code_o,      /// why
  output logic [63:0]          err_addr_o,      /// where
  output logic                 done_event_o,    /// one cycle at a successful end
  output logic                 error_event_o,   /// one cycle at a failed end
  // Performance counters.
  output logic [63:0]          busy_cycles_o,
  output logic [63:0]          bytes_read_o,
  output logic [63:0]          bytes_written_o,
  output logic [31:0]          xfers_done_o,
  output logic [31:0]          xfers_failed_o,
  // AXI4 master.
  output req_t                 m_axi_req_o,     /// AXI4 master: the data mover (ID 0)
  input  rsp_t                 m_axi_rsp_i
);
  localparam int unsigned FifoCountWidth = $clog2(FifoDepth + 1);

  // ---------------------------------------------------------------- control
  typedef enum logic [1:0] {StIdle, StCheck, StRun, StFinish} state_e;
  state_e state_q;

  logic [63:0] src_q, dst_q;
  logic [31:0] row_bytes_q, rows_q, src_stride_q, dst_stride_q;
  logic        stop_q;          // no new bursts: error or abort
  err_code_e   err_code_q;
  logic [63:0] err_addr_q;
  logic        done_q, error_q;
  logic        eng_start;

  // Does [base, base + len) lie inside one memory window? 66-bit sums cannot overflow.
  function automatic logic in_window(logic [63:0] base, logic [65:0] len);
    logic [65:0] last;
    last = 66'(base) + len;
    return (Mem0Size != 0 && base >= Mem0Base && last <= 66'(Mem0Base) + 66'(Mem0Size))
        || (Mem1Size != 0 && base >= Mem1Base && last <= 66'(Mem1Base) + 66'(Mem1Size))
        || (Mem2Size != 0 && base >= Mem2Base && last <= 66'(Mem2Base) + 66'(Mem2Size));
  endfunction

  // Bytes from the first to one past the last byte of a strided transfer.
  function automatic logic [65:0] extent(logic [31:0] rows, logic [31:0] stride,
                                         logic [31:0] row_bytes);
    return 66'(rows - 32'd1) * 66'(stride) + 66'(row_bytes);
  endfunction

  // The checks are computed once, from the programmed values at START, and registered with
  // them: as combinational logic of the latched values, their 66-bit products would be
  // re-evaluated by Verilator at every clock edge (about 5% of an idle cycle).
  logic        zero_len_q, src_ok_q, dst_ok_q;

  logic rd_busy, wr_busy, rd_error, wr_error;
  logic [AddrWidth-1:0] rd_burst_addr, wr_burst_addr;
  logic [1:0] rd_error_resp;
  wire  [1:0] b_resp = m_axi_rsp_i.b.resp;  // a wire for the process below (npu_axi_demux)

  assign eng_start = state_q == StCheck && !zero_len_q && src_ok_q && dst_ok_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q      <= StIdle;
      src_q        <= '0;
      dst_q        <= '0;
      row_bytes_q  <= '0;
      rows_q       <= '0;
      src_stride_q <= '0;
      dst_stride_q <= '0;
      stop_q       <= 1'b0;
      err_code_q   <= ErrNone;
      err_addr_q   <= '0;
      done_q       <= 1'b0;
      error_q      <= 1'b0;
      zero_len_q   <= 1'b0;
      src_ok_q     <= 1'b0;
      dst_ok_q     <= 1'b0;
    end else begin
      unique case (state_q)
        StIdle: if (start_i) begin
          src_q        <= src_i;
          dst_q        <= dst_i;
          row_bytes_q  <= row_bytes_i;
          rows_q       <= rows_i;
          src_stride_q <= src_stride_i;
          dst_stride_q <= dst_stride_i;
          zero_len_q   <= row_bytes_i == '0 || rows_i == '0;
          src_ok_q     <= in_window(src_i, extent(rows_i, src_stride_i, row_bytes_i));
          dst_ok_q     <= in_window(dst_i, extent(rows_i, dst_stride_i, row_bytes_i));
          stop_q       <= 1'b0;
          err_code_q   <= ErrNone;
          err_addr_q   <= '0;
          done_q       <= 1'b0;
          error_q      <= 1'b0;
          state_q      <= StCheck;
        end
        StCheck: begin
          if (zero_len_q) begin
            err_code_q <= ErrZeroLength;
            err_addr_q <= src_q;
            state_q    <= StFinish;
          end else if (!src_ok_q) begin
            err_code_q <= ErrSrcRange;
            err_addr_q <= src_q;
            state_q    <= StFinish;
          end else if (!dst_ok_q) begin
            err_code_q <= ErrDstRange;
            err_addr_q <= dst_q;
            state_q    <= StFinish;
          end else begin
            state_q <= StRun;
          end
        end
        StRun: begin
          // The first failure names the transfer's outcome; later ones are consequences.
          if (!stop_q) begin
            if (rd_error) begin
              stop_q     <= 1'b1;
              err_code_q <= (rd_error_resp == RespDecerr) ? ErrReadDecerr : ErrReadSlverr;
              err_addr_q <= 64'(rd_burst_addr);
            end else if (wr_error) begin
              stop_q     <= 1'b1;
              err_code_q <= (b_resp == RespDecerr) ? ErrWriteDecerr : ErrWriteSlverr;
              err_addr_q <= 64'(wr_burst_addr);
            end else if (abort_i) begin
              stop_q     <= 1'b1;
              err_code_q <= ErrAborted;
            end
          end
          if (!rd_busy && !wr_busy) state_q <= StFinish;
        end
        StFinish: begin
          done_q  <= err_code_q == ErrNone;
          error_q <= err_code_q != ErrNone;
          stop_q  <= 1'b0;
          state_q <= StIdle;
        end
        default: state_q <= StIdle;
      endcase
    end
  end

  wire finishing = state_q == StFinish;
  assign busy_o        = state_q != StIdle;
  assign done_o        = done_q;
  assign error_o       = error_q;
  assign err_code_o    = err_code_q;
  assign err_addr_o    = err_addr_q;
  assign done_event_o  = finishing && err_code_q == ErrNone;
  assign error_event_o = finishing && err_code_q != ErrNone;

  // ---------------------------------------------------------------- datapath
  localparam int unsigned RowWidth = 2 * OffWidth + 32;
  logic                 row_in_valid, row_in_ready, row_out_valid, row_out_ready;
  logic [OffWidth-1:0]  row_in_src_off, row_in_dst_off, row_out_src_off, row_out_dst_off;
  logic [31:0]          row_in_bytes, row_out_bytes;
  logic [FifoCountWidth-1:0] fifo_count;
  logic [DataWidth-1:0] al_data, fifo_data;
  logic [BusBytes-1:0]  al_strb, fifo_strb;
  logic                 al_valid, al_ready, fifo_valid, fifo_ready;
  logic [31:0]          beat_bytes_read;
  logic [BusBytes-1:0]  w_strb_fire;
  // The AXI4 master's channels, as the read and write sides drive them.
  logic [AddrWidth-1:0] ar_addr, aw_addr;
  logic [7:0]           ar_len, aw_len;
  logic                 ar_valid, r_ready, aw_valid, w_valid, w_last, b_ready;
  logic [DataWidth-1:0] w_data;
  logic [BusBytes-1:0]  w_strb;

  npu_dma_rd #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .MaxBurstBeats(MaxBurstBeats),
    .MaxOutstanding(MaxOutstanding), .FifoDepth(FifoDepth)
  ) u_rd (
    .clk_i, .rst_ni,
    .start_i(eng_start), .stop_i(stop_q),
    .src_i(AddrWidth'(src_q)), .dst_off_i(dst_q[OffWidth-1:0]),
    .row_bytes_i(row_bytes_q), .rows_i(rows_q),
    .src_stride_i(src_stride_q), .dst_stride_i(dst_stride_q[OffWidth-1:0]),
    .fifo_count_i(fifo_count),
    .ar_addr_o(ar_addr), .ar_len_o(ar_len), .ar_valid_o(ar_valid),
    .ar_ready_i(m_axi_rsp_i.ar_ready),
    .r_fire_i(m_axi_rsp_i.r_valid && r_ready), .r_last_i(m_axi_rsp_i.r.last),
    .row_valid_o(row_in_valid), .row_ready_i(row_in_ready),
    .row_src_off_o(row_in_src_off), .row_dst_off_o(row_in_dst_off), .row_bytes_o(row_in_bytes),
    .burst_addr_o(rd_burst_addr), .busy_o(rd_busy)
  );

  npu_fifo #(.Width(RowWidth), .Depth(MaxOutstanding + 2)) u_row_fifo (
    .clk_i, .rst_ni, .clear_i(finishing),
    .in_data_i({row_in_src_off, row_in_dst_off, row_in_bytes}),
    .in_valid_i(row_in_valid), .in_ready_o(row_in_ready),
    .out_data_o({row_out_src_off, row_out_dst_off, row_out_bytes}),
    .out_valid_o(row_out_valid), .out_ready_i(row_out_ready),
    .count_o()
  );

  npu_dma_align #(.BusBytes(BusBytes)) u_align (
    .clk_i, .rst_ni, .clear_i(finishing), .drop_i(stop_q),
    .row_valid_i(row_out_valid), .row_ready_o(row_out_ready),
    .row_src_off_i(row_out_src_off), .row_dst_off_i(row_out_dst_off),
    .row_bytes_i(row_out_bytes),
    .r_data_i(m_axi_rsp_i.r.data), .r_resp_i(m_axi_rsp_i.r.resp),
    .r_valid_i(m_axi_rsp_i.r_valid), .r_ready_o(r_ready),
    .out_data_o(al_data), .out_strb_o(al_strb), .out_valid_o(al_valid), .out_ready_i(al_ready),
    .r_error_o(rd_error), .bytes_read_o(beat_bytes_read)
  );
  assign rd_error_resp = m_axi_rsp_i.r.resp;

  npu_fifo #(.Width(DataWidth + BusBytes), .Depth(FifoDepth)) u_data_fifo (
    .clk_i, .rst_ni, .clear_i(finishing),
    .in_data_i({al_strb, al_data}), .in_valid_i(al_valid), .in_ready_o(al_ready),
    .out_data_o({fifo_strb, fifo_data}), .out_valid_o(fifo_valid), .out_ready_i(fifo_ready),
    .count_o(fifo_count)
  );

  npu_dma_wr #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .MaxBurstBeats(MaxBurstBeats),
    .MaxOutstanding(MaxOutstanding), .FifoDepth(FifoDepth)
  ) u_wr (
    .clk_i, .rst_ni,
    .start_i(eng_start), .stop_i(stop_q),
    .dst_i(AddrWidth'(dst_q)), .row_bytes_i(row_bytes_q), .rows_i(rows_q),
    .dst_stride_i(dst_stride_q),
    .fifo_count_i(fifo_count), .fifo_data_i(fifo_data), .fifo_strb_i(fifo_strb),
    .fifo_valid_i(fifo_valid), .fifo_ready_o(fifo_ready),
    .aw_addr_o(aw_addr), .aw_len_o(aw_len), .aw_valid_o(aw_valid),
    .aw_ready_i(m_axi_rsp_i.aw_ready),
    .w_data_o(w_data), .w_strb_o(w_strb), .w_last_o(w_last), .w_valid_o(w_valid),
    .w_ready_i(m_axi_rsp_i.w_ready),
    .b_resp_i(b_resp), .b_valid_i(m_axi_rsp_i.b_valid), .b_ready_o(b_ready),
    .b_error_o(wr_error), .w_strb_fire_o(w_strb_fire),
    .burst_addr_o(wr_burst_addr), .busy_o(wr_busy)
  );

  // Full-width INCR bursts, ID 0 (responses stay in order).
  assign m_axi_req_o = '{
    aw: '{id: '0, addr: aw_addr, len: aw_len, size: 3'($clog2(BusBytes)), burst: BurstIncr},
    aw_valid: aw_valid, w: '{data: w_data, strb: w_strb, last: w_last}, w_valid: w_valid,
    b_ready: b_ready,
    ar: '{id: '0, addr: ar_addr, len: ar_len, size: 3'($clog2(BusBytes)), burst: BurstIncr},
    ar_valid: ar_valid, r_ready: r_ready
  };

  // ---------------------------------------------------------------- counters
  logic [31:0] beat_bytes_written;
  always_comb begin
    beat_bytes_written = '0;
    for (int l = 0; l < BusBytes; l++) beat_bytes_written += 32'(w_strb_fire[l]);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_cycles_o   <= '0;
      bytes_read_o    <= '0;
      bytes_written_o <= '0;
      xfers_done_o    <= '0;
      xfers_failed_o  <= '0;
    end else if (perf_clear_i) begin
      busy_cycles_o   <= '0;
      bytes_read_o    <= '0;
      bytes_written_o <= '0;
      xfers_done_o    <= '0;
      xfers_failed_o  <= '0;
    end else begin
      busy_cycles_o   <= busy_cycles_o + 64'(busy_o);
      bytes_read_o    <= bytes_read_o + 64'(beat_bytes_read);
      bytes_written_o <= bytes_written_o + 64'(beat_bytes_written);
      xfers_done_o    <= xfers_done_o + 32'(done_event_o);
      xfers_failed_o  <= xfers_failed_o + 32'(error_event_o);
    end
  end

  // ---------------------------------------------------------------- assertions
  // Bytes moved by the current transfer (reset at START) against what it was asked to move.
  logic [63:0] xfer_read_q, xfer_written_q, xfer_total_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      xfer_read_q    <= '0;
      xfer_written_q <= '0;
      xfer_total_q   <= '0;
    end else if (state_q == StIdle) begin
      xfer_read_q    <= '0;
      xfer_written_q <= '0;
    end else begin
      if (state_q == StCheck) xfer_total_q <= 64'(row_bytes_q) * 64'(rows_q);
      xfer_read_q    <= xfer_read_q + 64'(beat_bytes_read);
      xfer_written_q <= xfer_written_q + 64'(beat_bytes_written);
    end
  end
  `NPU_ASSERT(DmaWrittenLeRead, xfer_written_q <= xfer_read_q,
              $sformatf("wrote %0d bytes of a transfer but read only %0d", xfer_written_q,
                        xfer_read_q))
  `NPU_ASSERT(DmaReadLeTotal, state_q != StRun || xfer_read_q <= xfer_total_q,
              $sformatf("read %0d bytes of a %0d-byte transfer", xfer_read_q, xfer_total_q))
  `NPU_ASSERT(DmaDoneBytes, !done_event_o || (xfer_read_q == xfer_total_q
              && xfer_written_q == xfer_total_q),
              $sformatf("transfer done with %0d bytes read and %0d written of %0d", xfer_read_q,
                        xfer_written_q, xfer_total_q))
  `NPU_ASSERT_ONEHOT0(DmaOneOutcome, {done_q, error_q}, "DONE and ERROR both set")
  `NPU_ASSERT_NEVER(DmaBusIdle, state_q != StRun && (ar_valid || aw_valid),
                    "a burst requested outside a running transfer")
  `NPU_ASSERT_NEVER(DmaFinishBusy, state_q == StFinish && (rd_busy || wr_busy),
                    "transfer finished with bursts in flight")
  `NPU_ASSERT(DmaPerfMonotonic, !$past(rst_ni) || $past(perf_clear_i)
              || (bytes_read_o >= $past(bytes_read_o) && bytes_written_o >= $past(bytes_written_o)),
              "a byte counter went down without PERF_CTRL.CLEAR")

  // Unused inputs: IDs come back as sent (single ID).
  logic unused;
  assign unused = ^{m_axi_rsp_i.r.id, m_axi_rsp_i.b.id};
endmodule

`default_nettype wire
