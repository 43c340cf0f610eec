`default_nettype none
`include "npu_assert.svh"

`include "npu_axi_assign.svh"

/// DMA engine block: the generated CSR block (`dma_csr`, AXI4-Lite slave) joined to the
/// engine core through the hwif structs, plus the interrupt line.
module npu_dma #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned MaxBurstBeats = 256,  /// longest burst
  parameter int unsigned MaxOutstanding = 8,   /// bursts in flight per direction
  parameter int unsigned FifoDepth = 1024,     /// data FIFO entries (beats)
  parameter logic [63:0] Mem0Base = 64'h0,     /// memory window 0 base
  parameter logic [63:0] Mem0Size = 64'h0,     /// memory window 0 size (0 = absent)
  parameter logic [63:0] Mem1Base = 64'h0,     /// memory window 1 base
  parameter logic [63:0] Mem1Size = 64'h0,     /// memory window 1 size
  parameter logic [63:0] Mem2Base = 64'h0,     /// memory window 2 base
  parameter logic [63:0] Mem2Size = 64'h0,     /// memory window 2 size
  parameter int unsigned HwVersionMajor = 0,   /// HW_VERSION.MAJOR
  parameter int unsigned HwVersionMinor = 0,   /// HW_VERSION.MINOR
  parameter int unsigned HwVersionPatch = 0,   /// HW_VERSION.PATCH
  parameter type axil_req_t = logic,  /// AXI4-Lite request, 12-bit offset (npu_axi_typedef.svh)
  parameter type axil_rsp_t = logic,  /// AXI4-Lite response
  parameter type axi_req_t = logic,   /// AXI4 request
  parameter type axi_rsp_t = logic    /// AXI4 response
) (
  input  wire       clk_i,          /// clock
  input  wire       rst_ni,         /// asynchronous reset, active low
  input  axil_req_t s_axil_req_i,   /// AXI4-Lite slave: the CSRs (12-bit block offset)
  output axil_rsp_t s_axil_rsp_o,
  output axi_req_t  m_axi_req_o,    /// AXI4 master: the data mover
  input  axi_rsp_t  m_axi_rsp_i,
  output logic      irq_o,          /// level interrupt: INT_STATUS & INT_ENABLE
  output logic      busy_o          /// a transfer is running
);
  import dma_csr_pkg::*;
  import npu_dma_pkg::*;

  dma_csr__in_t  hwif_in;
  dma_csr__out_t hwif_out;

  dma_csr u_csr (
    .clk(clk_i), .arst_n(rst_ni),
    `NPU_AXIL_CONNECT_FLAT(s_axil, s_axil_req_i, s_axil_rsp_o),
    .hwif_in(hwif_in), .hwif_out(hwif_out)
  );

  logic        done, error, done_event, error_event;
  err_code_e   err_code;
  logic [63:0] err_addr, busy_cycles, bytes_read, bytes_written;
  logic [31:0] xfers_done, xfers_failed;

  npu_dma_core #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth),
    .MaxBurstBeats(MaxBurstBeats), .MaxOutstanding(MaxOutstanding), .FifoDepth(FifoDepth),
    .Mem0Base(Mem0Base), .Mem0Size(Mem0Size), .Mem1Base(Mem1Base), .Mem1Size(Mem1Size),
    .Mem2Base(Mem2Base), .Mem2Size(Mem2Size), .req_t(axi_req_t), .rsp_t(axi_rsp_t)
  ) u_core (
    .clk_i, .rst_ni,
    .start_i(hwif_out.CTRL.START.value),
    .abort_i(hwif_out.CTRL.ABORT.value),
    .src_i({hwif_out.SRC_HI.ADDR.value, hwif_out.SRC_LO.ADDR.value}),
    .dst_i({hwif_out.DST_HI.ADDR.value, hwif_out.DST_LO.ADDR.value}),
    .row_bytes_i(hwif_out.ROW_BYTES.BYTES.value),
    .rows_i(hwif_out.ROWS.COUNT.value),
    .src_stride_i(hwif_out.SRC_STRIDE.BYTES.value),
    .dst_stride_i(hwif_out.DST_STRIDE.BYTES.value),
    .perf_clear_i(hwif_out.PERF_CTRL.CLEAR.value),
    .busy_o, .done_o(done), .error_o(error), .err_code_o(err_code), .err_addr_o(err_addr),
    .done_event_o(done_event), .error_event_o(error_event),
    .busy_cycles_o(busy_cycles), .bytes_read_o(bytes_read), .bytes_written_o(bytes_written),
    .xfers_done_o(xfers_done), .xfers_failed_o(xfers_failed),
    .m_axi_req_o, .m_axi_rsp_i
  );

  // 64-bit counters: reading LO latches HI, so LO then HI is one consistent value.
  logic [31:0] busy_cycles_hi_q, bytes_read_hi_q, bytes_written_hi_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_cycles_hi_q   <= '0;
      bytes_read_hi_q    <= '0;
      bytes_written_hi_q <= '0;
    end else begin
      if (hwif_out.BUSY_CYCLES_LO.COUNT.swacc) busy_cycles_hi_q <= busy_cycles[63:32];
      if (hwif_out.BYTES_READ_LO.COUNT.swacc) bytes_read_hi_q <= bytes_read[63:32];
      if (hwif_out.BYTES_WRITTEN_LO.COUNT.swacc) bytes_written_hi_q <= bytes_written[63:32];
    end
  end

  always_comb begin
    hwif_in.HW_VERSION.MAJOR.next = 8'(HwVersionMajor);
    hwif_in.HW_VERSION.MINOR.next = 8'(HwVersionMinor);
    hwif_in.HW_VERSION.PATCH.next = 8'(HwVersionPatch);
    hwif_in.CAPS.BUS_BYTES.next = 8'(BusBytes);
    hwif_in.CAPS.MAX_BURST_BEATS.next = 9'(MaxBurstBeats);
    hwif_in.CAPS.MAX_OUTSTANDING.next = 4'(MaxOutstanding);
    hwif_in.CAPS.CHANNELS.next = 4'd1;
    hwif_in.STATUS.BUSY.next = busy_o;
    hwif_in.STATUS.DONE.next = done;
    hwif_in.STATUS.ERROR.next = error;
    hwif_in.STATUS.ERR_CODE.next = err_code;
    hwif_in.ERR_ADDR_LO.ADDR.next = err_addr[31:0];
    hwif_in.ERR_ADDR_HI.ADDR.next = err_addr[63:32];
    hwif_in.INT_STATUS.DONE.hwset = done_event;
    hwif_in.INT_STATUS.ERROR.hwset = error_event;
    hwif_in.INT_RAW.DONE.next = done;
    hwif_in.INT_RAW.ERROR.next = error;
    hwif_in.BUSY_CYCLES_LO.COUNT.next = busy_cycles[31:0];
    hwif_in.BUSY_CYCLES_HI.COUNT.next = busy_cycles_hi_q;
    hwif_in.BYTES_READ_LO.COUNT.next = bytes_read[31:0];
    hwif_in.BYTES_READ_HI.COUNT.next = bytes_read_hi_q;
    hwif_in.BYTES_WRITTEN_LO.COUNT.next = bytes_written[31:0];
    hwif_in.BYTES_WRITTEN_HI.COUNT.next = bytes_written_hi_q;
    hwif_in.XFERS_DONE.COUNT.next = xfers_done;
    hwif_in.XFERS_FAILED.COUNT.next = xfers_failed;
  end

  assign irq_o = (hwif_out.INT_STATUS.DONE.value && hwif_out.INT_ENABLE.DONE.value)
              || (hwif_out.INT_STATUS.ERROR.value && hwif_out.INT_ENABLE.ERROR.value);

  // Protocol assertions on both ports (rtl/bus/npu_axi_sva.sv, npu_axil_checker.sv).
  npu_axi_sva #(
    .Name("dma master"), .MaxOutstanding(MaxOutstanding), .req_t(axi_req_t), .rsp_t(axi_rsp_t)
  ) u_sva_axi (.clk_i, .rst_ni, .req_i(m_axi_req_o), .rsp_i(m_axi_rsp_i));
  npu_axil_checker #(.Name("dma register port"), .req_t(axil_req_t), .rsp_t(axil_rsp_t))
  u_sva_axil (.clk_i, .rst_ni, .req_i(s_axil_req_i), .rsp_i(s_axil_rsp_o), .tb_i(1'b0));

  // CSR fields (the generated dma_csr has no assertions of its own): a singlepulse field is
  // high one cycle; a write-1-to-clear field is only ever set by its hardware event. The
  // fields by name: tests/rtl/test_assertions.py forces them.
  wire csr_start = hwif_out.CTRL.START.value, csr_abort = hwif_out.CTRL.ABORT.value;
  wire csr_perf_clear = hwif_out.PERF_CTRL.CLEAR.value;
  wire csr_int_done = hwif_out.INT_STATUS.DONE.value;
  wire csr_int_error = hwif_out.INT_STATUS.ERROR.value;
  `NPU_ASSERT_NEVER(DmaCsrStartPulse, $past(csr_start) && csr_start,
                    "CTRL.START (singlepulse) high two cycles running")
  `NPU_ASSERT_NEVER(DmaCsrAbortPulse, $past(csr_abort) && csr_abort,
                    "CTRL.ABORT (singlepulse) high two cycles running")
  `NPU_ASSERT_NEVER(DmaCsrPerfClearPulse, $past(csr_perf_clear) && csr_perf_clear,
                    "PERF_CTRL.CLEAR (singlepulse) high two cycles running")
  `NPU_ASSERT(DmaCsrDoneW1c, !$rose(csr_int_done) || $past(done_event),
              "INT_STATUS.DONE (w1c) rose without a done event")
  `NPU_ASSERT(DmaCsrErrorW1c, !$rose(csr_int_error) || $past(error_event),
              "INT_STATUS.ERROR (w1c) rose without an error event")
endmodule

`default_nettype wire
