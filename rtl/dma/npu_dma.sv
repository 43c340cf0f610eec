`default_nettype none

/// DMA engine block: the generated CSR block (`dma_csr`, AXI4-Lite slave) joined to the
/// engine core through the hwif structs, plus the interrupt line.
module npu_dma #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned IdWidth = 4,          /// AXI ID bits
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
  localparam int unsigned DataWidth = BusBytes * 8
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  // AXI4-Lite slave: the CSRs (12-bit block offset).
  output logic                 s_axil_awready,
  input  wire                  s_axil_awvalid,
  input  wire  [11:0]          s_axil_awaddr,
  input  wire  [2:0]           s_axil_awprot,
  output logic                 s_axil_wready,
  input  wire                  s_axil_wvalid,
  input  wire  [31:0]          s_axil_wdata,
  input  wire  [3:0]           s_axil_wstrb,
  input  wire                  s_axil_bready,
  output logic                 s_axil_bvalid,
  output logic [1:0]           s_axil_bresp,
  output logic                 s_axil_arready,
  input  wire                  s_axil_arvalid,
  input  wire  [11:0]          s_axil_araddr,
  input  wire  [2:0]           s_axil_arprot,
  input  wire                  s_axil_rready,
  output logic                 s_axil_rvalid,
  output logic [31:0]          s_axil_rdata,
  output logic [1:0]           s_axil_rresp,
  // AXI4 master: the data mover.
  output logic [IdWidth-1:0]   m_axi_arid,
  output logic [AddrWidth-1:0] m_axi_araddr,
  output logic [7:0]           m_axi_arlen,
  output logic [2:0]           m_axi_arsize,
  output logic [1:0]           m_axi_arburst,
  output logic [3:0]           m_axi_arcache,
  output logic [2:0]           m_axi_arprot,
  output logic                 m_axi_arvalid,
  input  wire                  m_axi_arready,
  input  wire  [IdWidth-1:0]   m_axi_rid,
  input  wire  [DataWidth-1:0] m_axi_rdata,
  input  wire  [1:0]           m_axi_rresp,
  input  wire                  m_axi_rlast,
  input  wire                  m_axi_rvalid,
  output logic                 m_axi_rready,
  output logic [IdWidth-1:0]   m_axi_awid,
  output logic [AddrWidth-1:0] m_axi_awaddr,
  output logic [7:0]           m_axi_awlen,
  output logic [2:0]           m_axi_awsize,
  output logic [1:0]           m_axi_awburst,
  output logic [3:0]           m_axi_awcache,
  output logic [2:0]           m_axi_awprot,
  output logic                 m_axi_awvalid,
  input  wire                  m_axi_awready,
  output logic [DataWidth-1:0] m_axi_wdata,
  output logic [BusBytes-1:0]  m_axi_wstrb,
  output logic                 m_axi_wlast,
  output logic                 m_axi_wvalid,
  input  wire                  m_axi_wready,
  input  wire  [IdWidth-1:0]   m_axi_bid,
  input  wire  [1:0]           m_axi_bresp,
  input  wire                  m_axi_bvalid,
  output logic                 m_axi_bready,
  // Status.
  output logic                 irq_o,          /// level interrupt: INT_STATUS & INT_ENABLE
  output logic                 busy_o          /// a transfer is running
);
  import dma_csr_pkg::*;
  import npu_dma_pkg::*;

  dma_csr__in_t  hwif_in;
  dma_csr__out_t hwif_out;

  dma_csr u_csr (
    .clk(clk_i), .arst_n(rst_ni),
    .s_axil_awready, .s_axil_awvalid, .s_axil_awaddr, .s_axil_awprot,
    .s_axil_wready, .s_axil_wvalid, .s_axil_wdata, .s_axil_wstrb,
    .s_axil_bready, .s_axil_bvalid, .s_axil_bresp,
    .s_axil_arready, .s_axil_arvalid, .s_axil_araddr, .s_axil_arprot,
    .s_axil_rready, .s_axil_rvalid, .s_axil_rdata, .s_axil_rresp,
    .hwif_in(hwif_in), .hwif_out(hwif_out)
  );

  logic        done, error, done_event, error_event;
  err_code_e   err_code;
  logic [63:0] err_addr, busy_cycles, bytes_read, bytes_written;
  logic [31:0] xfers_done, xfers_failed;

  npu_dma_core #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
    .MaxBurstBeats(MaxBurstBeats), .MaxOutstanding(MaxOutstanding), .FifoDepth(FifoDepth),
    .Mem0Base(Mem0Base), .Mem0Size(Mem0Size), .Mem1Base(Mem1Base), .Mem1Size(Mem1Size),
    .Mem2Base(Mem2Base), .Mem2Size(Mem2Size)
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
    .m_axi_arid, .m_axi_araddr, .m_axi_arlen, .m_axi_arsize, .m_axi_arburst, .m_axi_arcache,
    .m_axi_arprot, .m_axi_arvalid, .m_axi_arready,
    .m_axi_rid, .m_axi_rdata, .m_axi_rresp, .m_axi_rlast, .m_axi_rvalid, .m_axi_rready,
    .m_axi_awid, .m_axi_awaddr, .m_axi_awlen, .m_axi_awsize, .m_axi_awburst, .m_axi_awcache,
    .m_axi_awprot, .m_axi_awvalid, .m_axi_awready,
    .m_axi_wdata, .m_axi_wstrb, .m_axi_wlast, .m_axi_wvalid, .m_axi_wready,
    .m_axi_bid, .m_axi_bresp, .m_axi_bvalid, .m_axi_bready
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
endmodule

`default_nettype wire
