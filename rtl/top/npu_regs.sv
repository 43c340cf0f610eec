`default_nettype none

/// NPU register block: the generated CSR block (`npu_csr`) with its hardware side:
/// identification from parameters, interrupt sources, and the cycle counter.
module npu_regs #(
  parameter int unsigned TargetId = 1,          /// TARGET.ID (1 Buyi, 2 ZG330)
  parameter int unsigned HwVersionMajor = 0,    /// HW_VERSION.MAJOR
  parameter int unsigned HwVersionMinor = 0,    /// HW_VERSION.MINOR
  parameter int unsigned HwVersionPatch = 0,    /// HW_VERSION.PATCH
  parameter int unsigned DmaBusBytes = 16,      /// CAPS.DMA_BUS_BYTES
  parameter bit          HasCompute = 1'b0,     /// CAPS.HAS_COMPUTE
  parameter logic [63:0] UdmaBase = 64'h0,      /// UDMA_BASE_*
  parameter logic [63:0] UdmaSize = 64'h0,      /// UDMA_SIZE (bytes; reported in KiB)
  parameter logic [63:0] PlddrBase = 64'h0,     /// PLDDR_BASE_*
  parameter logic [63:0] PlddrSize = 64'h0,     /// PLDDR_SIZE
  parameter logic [63:0] OcmBase = 64'h0,       /// OCM_BASE_* (size 0: no OCM)
  parameter logic [63:0] OcmSize = 64'h0        /// OCM_SIZE
) (
  input  wire         clk_i,          /// clock
  input  wire         rst_ni,         /// asynchronous reset, active low
  output logic        s_axil_awready,
  input  wire         s_axil_awvalid,
  input  wire  [11:0] s_axil_awaddr,
  input  wire  [2:0]  s_axil_awprot,
  output logic        s_axil_wready,
  input  wire         s_axil_wvalid,
  input  wire  [31:0] s_axil_wdata,
  input  wire  [3:0]  s_axil_wstrb,
  input  wire         s_axil_bready,
  output logic        s_axil_bvalid,
  output logic [1:0]  s_axil_bresp,
  output logic        s_axil_arready,
  input  wire         s_axil_arvalid,
  input  wire  [11:0] s_axil_araddr,
  input  wire  [2:0]  s_axil_arprot,
  input  wire         s_axil_rready,
  output logic        s_axil_rvalid,
  output logic [31:0] s_axil_rdata,
  output logic [1:0]  s_axil_rresp,
  input  wire         dma_busy_i,     /// STATUS.DMA_BUSY
  output logic        irq_o           /// level interrupt: INT_STATUS & INT_ENABLE
);
  import npu_csr_pkg::*;

  npu_csr__in_t  hwif_in;
  npu_csr__out_t hwif_out;

  npu_csr u_csr (
    .clk(clk_i), .arst_n(rst_ni),
    .s_axil_awready, .s_axil_awvalid, .s_axil_awaddr, .s_axil_awprot,
    .s_axil_wready, .s_axil_wvalid, .s_axil_wdata, .s_axil_wstrb,
    .s_axil_bready, .s_axil_bvalid, .s_axil_bresp,
    .s_axil_arready, .s_axil_arvalid, .s_axil_araddr, .s_axil_arprot,
    .s_axil_rready, .s_axil_rvalid, .s_axil_rdata, .s_axil_rresp,
    .hwif_in(hwif_in), .hwif_out(hwif_out)
  );

  // Cycles since reset; reading CYCLES_LO latches the high half for CYCLES_HI.
  logic [63:0] cycles_q;
  logic [31:0] cycles_hi_q;
  logic        sw_irq_q;   // CTRL.SW_IRQ last cycle, to latch its rising edge
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cycles_q    <= '0;
      cycles_hi_q <= '0;
      sw_irq_q    <= 1'b0;
    end else begin
      cycles_q <= cycles_q + 1'b1;
      if (hwif_out.CYCLES_LO.COUNT.swacc) cycles_hi_q <= cycles_q[63:32];
      sw_irq_q <= hwif_out.CTRL.SW_IRQ.value;
    end
  end

  always_comb begin
    hwif_in.HW_VERSION.MAJOR.next    = 8'(HwVersionMajor);
    hwif_in.HW_VERSION.MINOR.next    = 8'(HwVersionMinor);
    hwif_in.HW_VERSION.PATCH.next    = 8'(HwVersionPatch);
    hwif_in.TARGET.ID.next           = 8'(TargetId);
    hwif_in.CAPS.DMA_BUS_BYTES.next  = 8'(DmaBusBytes);
    hwif_in.CAPS.HAS_OCM.next        = OcmSize != 0;
    hwif_in.CAPS.HAS_COMPUTE.next    = HasCompute;
    hwif_in.UDMA_BASE_LO.ADDR.next   = UdmaBase[31:0];
    hwif_in.UDMA_BASE_HI.ADDR.next   = UdmaBase[63:32];
    hwif_in.UDMA_SIZE.KIB.next       = 32'(UdmaSize >> 10);
    hwif_in.PLDDR_BASE_LO.ADDR.next  = PlddrBase[31:0];
    hwif_in.PLDDR_BASE_HI.ADDR.next  = PlddrBase[63:32];
    hwif_in.PLDDR_SIZE.KIB.next      = 32'(PlddrSize >> 10);
    hwif_in.OCM_BASE_LO.ADDR.next    = OcmBase[31:0];
    hwif_in.OCM_BASE_HI.ADDR.next    = OcmBase[63:32];
    hwif_in.OCM_SIZE.KIB.next        = 32'(OcmSize >> 10);
    hwif_in.STATUS.DMA_BUSY.next     = dma_busy_i;
    hwif_in.STATUS.COMPUTE_BUSY.next = 1'b0;
    hwif_in.INT_STATUS.SW.hwset      = hwif_out.CTRL.SW_IRQ.value && !sw_irq_q;
    hwif_in.INT_RAW.SW.next          = hwif_out.CTRL.SW_IRQ.value;
    hwif_in.CYCLES_LO.COUNT.next     = cycles_q[31:0];
    hwif_in.CYCLES_HI.COUNT.next     = cycles_hi_q;
  end

  assign irq_o = hwif_out.INT_STATUS.SW.value && hwif_out.INT_ENABLE.SW.value;
endmodule

`default_nettype wire
