`default_nettype none
`include "npu_assert.svh"

`include "npu_axi_assign.svh"

/// NPU register block: the generated CSR block (`npu_csr`) with its hardware side:
/// identification from parameters, interrupt sources (software, compute engine), the cycle
/// counter, and the compute engine's launch registers, status and counters
/// (`npu_cmp_core` is joined here through plain ports).
module npu_regs
  // NumPerf and the Perf* counter indices: generated from the PERF_* registers of the RDL.
  import npu_config_pkg::NumPerf;
  import npu_config_pkg::PerfRunCycles, npu_config_pkg::PerfLoadBusy,
    npu_config_pkg::PerfComputeBusy, npu_config_pkg::PerfStoreBusy,
    npu_config_pkg::PerfLoadTokenWait, npu_config_pkg::PerfComputeTokenWait,
    npu_config_pkg::PerfStoreTokenWait, npu_config_pkg::PerfGemmCycles,
    npu_config_pkg::PerfBytesRead, npu_config_pkg::PerfBytesWritten,
    npu_config_pkg::PerfLoadRetired, npu_config_pkg::PerfComputeRetired,
    npu_config_pkg::PerfStoreRetired;
#(
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
  parameter logic [63:0] OcmSize = 64'h0,       /// OCM_SIZE
  parameter int unsigned CoreBlock = 16,        /// CORE_CAPS.BLOCK
  parameter int unsigned CoreLutTables = 4,     /// CORE_CAPS.LUT_TABLES
  parameter int unsigned CoreBaseRegs = 16,     /// CORE_CAPS.BASE_REGS
  parameter int unsigned CoreTokenDepth = 64,   /// CORE_CAPS.TOKEN_DEPTH
  parameter int unsigned CoreInpRows = 8192,    /// CORE_ROWS0.INP
  parameter int unsigned CoreWgtRows = 1024,    /// CORE_ROWS0.WGT
  parameter int unsigned CoreAccRows = 4096,    /// CORE_ROWS1.ACC
  parameter int unsigned CorePrmRows = 256,    /// CORE_ROWS1.PRM
  parameter type req_t = logic,  /// AXI4-Lite request, 12-bit offset (npu_axi_typedef.svh)
  parameter type rsp_t = logic   /// AXI4-Lite response
) (
  input  wire         clk_i,          /// clock
  input  wire         rst_ni,         /// asynchronous reset, active low
  input  req_t        s_axil_req_i,   /// AXI4-Lite slave: the CSRs (12-bit block offset)
  output rsp_t        s_axil_rsp_o,
  input  wire         dma_busy_i,     /// STATUS.DMA_BUSY
  // Compute engine.
  output logic        core_start_o,   /// CORE_CTRL.START (one cycle)
  output logic        core_abort_o,   /// CORE_CTRL.ABORT (one cycle)
  output logic        core_wipe_o,    /// CORE_CTRL.WIPE (one cycle)
  output logic [63:0] core_prog_addr_o,   /// PROG_ADDR
  output logic [31:0] core_prog_insns_o,  /// PROG_INSNS
  output logic [15:0][63:0] core_base_o,  /// BASE0..15
  input  wire         core_busy_i,    /// CORE_STATUS.BUSY
  input  wire         core_done_i,    /// CORE_STATUS.DONE
  input  wire         core_error_i,   /// CORE_STATUS.ERROR
  input  wire         core_wiping_i,  /// CORE_STATUS.WIPING
  input  wire  [3:0]  core_err_code_i,/// CORE_STATUS.ERR_CODE
  input  wire  [1:0]  core_err_unit_i,/// CORE_STATUS.ERR_UNIT
  input  wire  [31:0] core_err_pc_i,  /// CORE_ERR_PC
  input  wire  [63:0] core_err_addr_i,/// CORE_ERR_ADDR
  input  wire         core_done_event_i,  /// latch INT_STATUS.CORE_DONE
  input  wire         core_error_event_i, /// latch INT_STATUS.CORE_ERROR
  input  wire  [NumPerf-1:0][63:0] core_perf_i,  /// PERF_* counters
  output logic        irq_o           /// level interrupt: INT_STATUS & INT_ENABLE
);
  import npu_csr_pkg::*;

  npu_csr__in_t  hwif_in;
  npu_csr__out_t hwif_out;

  npu_csr u_csr (
    .clk(clk_i), .arst_n(rst_ni),
    `NPU_AXIL_CONNECT_FLAT(s_axil, s_axil_req_i, s_axil_rsp_o),
    .hwif_in(hwif_in), .hwif_out(hwif_out)
  );

  // Cycles since reset; reading CYCLES_LO latches the high half for CYCLES_HI.
  logic [63:0] cycles_q;
  logic [31:0] cycles_hi_q;
  logic        sw_irq_q;   // CTRL.SW_IRQ last cycle, to latch its rising edge
  logic [NumPerf-1:0]       perf_lo_read;  // a PERF_*_LO register is being read
  logic [NumPerf-1:0][31:0] perf_hi_q;     // PERF_*_HI as latched by that read
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
    hwif_in.STATUS.COMPUTE_BUSY.next = core_busy_i;
    hwif_in.INT_STATUS.SW.hwset      = hwif_out.CTRL.SW_IRQ.value && !sw_irq_q;
    hwif_in.INT_RAW.SW.next          = hwif_out.CTRL.SW_IRQ.value;
    hwif_in.CYCLES_LO.COUNT.next     = cycles_q[31:0];
    hwif_in.CYCLES_HI.COUNT.next     = cycles_hi_q;
    hwif_in.CORE_STATUS.BUSY.next     = core_busy_i;
    hwif_in.CORE_STATUS.DONE.next     = core_done_i;
    hwif_in.CORE_STATUS.ERROR.next    = core_error_i;
    hwif_in.CORE_STATUS.WIPING.next   = core_wiping_i;
    hwif_in.CORE_STATUS.ERR_CODE.next = core_err_code_i;
    hwif_in.CORE_STATUS.ERR_UNIT.next = core_err_unit_i;
    hwif_in.CORE_ERR_PC.PC.next       = core_err_pc_i;
    hwif_in.CORE_ERR_ADDR_LO.ADDR.next = core_err_addr_i[31:0];
    hwif_in.CORE_ERR_ADDR_HI.ADDR.next = core_err_addr_i[63:32];
    hwif_in.CORE_CAPS.BLOCK.next       = 8'(CoreBlock);
    hwif_in.CORE_CAPS.LUT_TABLES.next  = 4'(CoreLutTables);
    hwif_in.CORE_CAPS.BASE_REGS.next   = 5'(CoreBaseRegs);
    hwif_in.CORE_CAPS.TOKEN_DEPTH.next = 8'(CoreTokenDepth);
    hwif_in.CORE_ROWS0.INP.next = 16'(CoreInpRows);
    hwif_in.CORE_ROWS0.WGT.next = 16'(CoreWgtRows);
    hwif_in.CORE_ROWS1.ACC.next = 16'(CoreAccRows);
    hwif_in.CORE_ROWS1.PRM.next = 16'(CorePrmRows);
    hwif_in.INT_STATUS.CORE_DONE.hwset  = core_done_event_i;
    hwif_in.INT_STATUS.CORE_ERROR.hwset = core_error_event_i;
    hwif_in.INT_RAW.CORE_DONE.next  = core_done_i;
    hwif_in.INT_RAW.CORE_ERROR.next = core_error_i;
    hwif_in.PERF_RUN_CYCLES_LO.COUNT.next         = core_perf_i[PerfRunCycles][31:0];
    hwif_in.PERF_RUN_CYCLES_HI.COUNT.next         = perf_hi_q[PerfRunCycles];
    hwif_in.PERF_LOAD_BUSY_LO.COUNT.next          = core_perf_i[PerfLoadBusy][31:0];
    hwif_in.PERF_LOAD_BUSY_HI.COUNT.next          = perf_hi_q[PerfLoadBusy];
    hwif_in.PERF_COMPUTE_BUSY_LO.COUNT.next       = core_perf_i[PerfComputeBusy][31:0];
    hwif_in.PERF_COMPUTE_BUSY_HI.COUNT.next       = perf_hi_q[PerfComputeBusy];
    hwif_in.PERF_STORE_BUSY_LO.COUNT.next         = core_perf_i[PerfStoreBusy][31:0];
    hwif_in.PERF_STORE_BUSY_HI.COUNT.next         = perf_hi_q[PerfStoreBusy];
    hwif_in.PERF_LOAD_TOKEN_WAIT_LO.COUNT.next    = core_perf_i[PerfLoadTokenWait][31:0];
    hwif_in.PERF_LOAD_TOKEN_WAIT_HI.COUNT.next    = perf_hi_q[PerfLoadTokenWait];
    hwif_in.PERF_COMPUTE_TOKEN_WAIT_LO.COUNT.next = core_perf_i[PerfComputeTokenWait][31:0];
    hwif_in.PERF_COMPUTE_TOKEN_WAIT_HI.COUNT.next = perf_hi_q[PerfComputeTokenWait];
    hwif_in.PERF_STORE_TOKEN_WAIT_LO.COUNT.next   = core_perf_i[PerfStoreTokenWait][31:0];
    hwif_in.PERF_STORE_TOKEN_WAIT_HI.COUNT.next   = perf_hi_q[PerfStoreTokenWait];
    hwif_in.PERF_GEMM_CYCLES_LO.COUNT.next        = core_perf_i[PerfGemmCycles][31:0];
    hwif_in.PERF_GEMM_CYCLES_HI.COUNT.next        = perf_hi_q[PerfGemmCycles];
    hwif_in.PERF_BYTES_READ_LO.COUNT.next         = core_perf_i[PerfBytesRead][31:0];
    hwif_in.PERF_BYTES_READ_HI.COUNT.next         = perf_hi_q[PerfBytesRead];
    hwif_in.PERF_BYTES_WRITTEN_LO.COUNT.next      = core_perf_i[PerfBytesWritten][31:0];
    hwif_in.PERF_BYTES_WRITTEN_HI.COUNT.next      = perf_hi_q[PerfBytesWritten];
    hwif_in.PERF_LOAD_RETIRED_LO.COUNT.next       = core_perf_i[PerfLoadRetired][31:0];
    hwif_in.PERF_LOAD_RETIRED_HI.COUNT.next       = perf_hi_q[PerfLoadRetired];
    hwif_in.PERF_COMPUTE_RETIRED_LO.COUNT.next    = core_perf_i[PerfComputeRetired][31:0];
    hwif_in.PERF_COMPUTE_RETIRED_HI.COUNT.next    = perf_hi_q[PerfComputeRetired];
    hwif_in.PERF_STORE_RETIRED_LO.COUNT.next      = core_perf_i[PerfStoreRetired][31:0];
    hwif_in.PERF_STORE_RETIRED_HI.COUNT.next      = perf_hi_q[PerfStoreRetired];
  end

  // ---------------------------------------------------------------- compute engine
  assign core_start_o      = hwif_out.CORE_CTRL.START.value;
  assign core_abort_o      = hwif_out.CORE_CTRL.ABORT.value;
  assign core_wipe_o       = hwif_out.CORE_CTRL.WIPE.value;
  assign core_prog_addr_o  = {hwif_out.PROG_ADDR_HI.ADDR.value, hwif_out.PROG_ADDR_LO.ADDR.value};
  assign core_prog_insns_o = hwif_out.PROG_INSNS.COUNT.value;
  assign core_base_o = {
    {hwif_out.BASE15_HI.ADDR.value, hwif_out.BASE15_LO.ADDR.value},
    {hwif_out.BASE14_HI.ADDR.value, hwif_out.BASE14_LO.ADDR.value},
    {hwif_out.BASE13_HI.ADDR.value, hwif_out.BASE13_LO.ADDR.value},
    {hwif_out.BASE12_HI.ADDR.value, hwif_out.BASE12_LO.ADDR.value},
    {hwif_out.BASE11_HI.ADDR.value, hwif_out.BASE11_LO.ADDR.value},
    {hwif_out.BASE10_HI.ADDR.value, hwif_out.BASE10_LO.ADDR.value},
    {hwif_out.BASE9_HI.ADDR.value, hwif_out.BASE9_LO.ADDR.value},
    {hwif_out.BASE8_HI.ADDR.value, hwif_out.BASE8_LO.ADDR.value},
    {hwif_out.BASE7_HI.ADDR.value, hwif_out.BASE7_LO.ADDR.value},
    {hwif_out.BASE6_HI.ADDR.value, hwif_out.BASE6_LO.ADDR.value},
    {hwif_out.BASE5_HI.ADDR.value, hwif_out.BASE5_LO.ADDR.value},
    {hwif_out.BASE4_HI.ADDR.value, hwif_out.BASE4_LO.ADDR.value},
    {hwif_out.BASE3_HI.ADDR.value, hwif_out.BASE3_LO.ADDR.value},
    {hwif_out.BASE2_HI.ADDR.value, hwif_out.BASE2_LO.ADDR.value},
    {hwif_out.BASE1_HI.ADDR.value, hwif_out.BASE1_LO.ADDR.value},
    {hwif_out.BASE0_HI.ADDR.value, hwif_out.BASE0_LO.ADDR.value}
  };

  // 64-bit counters: reading LO latches HI (one register per counter, as the DMA's).
  always_comb begin
    perf_lo_read[PerfRunCycles] = hwif_out.PERF_RUN_CYCLES_LO.COUNT.swacc;
    perf_lo_read[PerfLoadBusy] = hwif_out.PERF_LOAD_BUSY_LO.COUNT.swacc;
    perf_lo_read[PerfComputeBusy] = hwif_out.PERF_COMPUTE_BUSY_LO.COUNT.swacc;
    perf_lo_read[PerfStoreBusy] = hwif_out.PERF_STORE_BUSY_LO.COUNT.swacc;
    perf_lo_read[PerfLoadTokenWait] = hwif_out.PERF_LOAD_TOKEN_WAIT_LO.COUNT.swacc;
    perf_lo_read[PerfComputeTokenWait] = hwif_out.PERF_COMPUTE_TOKEN_WAIT_LO.COUNT.swacc;
    perf_lo_read[PerfStoreTokenWait] = hwif_out.PERF_STORE_TOKEN_WAIT_LO.COUNT.swacc;
    perf_lo_read[PerfGemmCycles] = hwif_out.PERF_GEMM_CYCLES_LO.COUNT.swacc;
    perf_lo_read[PerfBytesRead] = hwif_out.PERF_BYTES_READ_LO.COUNT.swacc;
    perf_lo_read[PerfBytesWritten] = hwif_out.PERF_BYTES_WRITTEN_LO.COUNT.swacc;
    perf_lo_read[PerfLoadRetired] = hwif_out.PERF_LOAD_RETIRED_LO.COUNT.swacc;
    perf_lo_read[PerfComputeRetired] = hwif_out.PERF_COMPUTE_RETIRED_LO.COUNT.swacc;
    perf_lo_read[PerfStoreRetired] = hwif_out.PERF_STORE_RETIRED_LO.COUNT.swacc;
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      perf_hi_q <= '0;
    end else begin
      for (int k = 0; k < NumPerf; k++) begin
        if (perf_lo_read[k]) perf_hi_q[k] <= core_perf_i[k][63:32];
      end
    end
  end


  assign irq_o = (hwif_out.INT_STATUS.SW.value && hwif_out.INT_ENABLE.SW.value)
              || (hwif_out.INT_STATUS.CORE_DONE.value && hwif_out.INT_ENABLE.CORE_DONE.value)
              || (hwif_out.INT_STATUS.CORE_ERROR.value && hwif_out.INT_ENABLE.CORE_ERROR.value);

  // The AXI4-Lite port (rtl/bus/npu_axil_checker.sv) and the CSR fields (the generated
  // npu_csr has no assertions of its own): a singlepulse field is high one cycle; a
  // write-1-to-clear field is only ever set by its hardware event.
  npu_axil_checker #(.Name("npu register port (regs)"), .req_t(req_t), .rsp_t(rsp_t))
  u_sva_axil (.clk_i, .rst_ni, .req_i(s_axil_req_i), .rsp_i(s_axil_rsp_o), .tb_i(1'b0));
  `NPU_ASSERT_NEVER(NpuCsrStartPulse,
                    $past(hwif_out.CORE_CTRL.START.value) && hwif_out.CORE_CTRL.START.value,
                    "CORE_CTRL.START (singlepulse) high two cycles running")
  `NPU_ASSERT_NEVER(NpuCsrAbortPulse,
                    $past(hwif_out.CORE_CTRL.ABORT.value) && hwif_out.CORE_CTRL.ABORT.value,
                    "CORE_CTRL.ABORT (singlepulse) high two cycles running")
  `NPU_ASSERT_NEVER(NpuCsrWipePulse,
                    $past(hwif_out.CORE_CTRL.WIPE.value) && hwif_out.CORE_CTRL.WIPE.value,
                    "CORE_CTRL.WIPE (singlepulse) high two cycles running")
  `NPU_ASSERT(NpuCsrSwIrqW1c, !$rose(hwif_out.INT_STATUS.SW.value)
              || $past(hwif_in.INT_STATUS.SW.hwset), "INT_STATUS.SW (w1c) rose without CTRL.SW_IRQ rising")
  `NPU_ASSERT(NpuCsrCoreDoneW1c, !$rose(hwif_out.INT_STATUS.CORE_DONE.value)
              || $past(core_done_event_i), "INT_STATUS.CORE_DONE (w1c) rose without a done event")
  `NPU_ASSERT(NpuCsrCoreErrorW1c, !$rose(hwif_out.INT_STATUS.CORE_ERROR.value)
              || $past(core_error_event_i), "INT_STATUS.CORE_ERROR (w1c) rose without an error event")
endmodule

`default_nettype wire
