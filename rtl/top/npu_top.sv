`default_nettype none

`include "npu_axi_typedef.svh"
`include "npu_axi_assign.svh"

/// The NPU, shared by both targets (`npu_buyi`, `npu_zg330` set its parameters).
///
///   s_axil (CPU, 32-bit addresses) -> npu_axil_demux -+-> npu_regs  (NpuBase, 4 KiB)
///                                                     +-> npu_dma   (DmaBase, 4 KiB)
///   npu_dma      AXI4 master -+
///                              +-> npu_axi_mux -> npu_axi_demux -+-> m_axi_[0]  PS DDR (udma)
///   npu_cmp_core AXI4 master -+                                  +-> m_axi_[1]  PL DDR (plddr)
///                                                                +-> OCM  on-chip SRAM (HasOcm)
///                                                                +-> DECERR   anything else
///
/// The demux keeps bursts to several memories in flight (R and B in request order), so the
/// engine's OCM and DDR transfers overlap; the DDR models (npu_sim) share one beat per cycle
/// between reads and writes, the OCM moves a read and a write beat each cycle.
///
/// The compute engine (`npu_cmp_core`) is controlled through npu_regs (launch registers,
/// status, counters) and is the CORE_DONE/CORE_ERROR interrupt source there.
module npu_top
  import npu_config_pkg::*;
#(
  parameter int unsigned TargetId = 1,           /// NPU_TARGET.ID
  parameter logic [31:0] NpuBase = 32'h4000_0000,/// NPU register block
  parameter logic [31:0] DmaBase = 32'h8000_0000,/// DMA register block
  parameter logic [63:0] UdmaBase = 64'h0,       /// PS DDR window base
  parameter logic [63:0] UdmaSize = 64'h0,       /// PS DDR window size
  parameter logic [63:0] PlddrBase = 64'h0,      /// PL DDR base
  parameter logic [63:0] PlddrSize = 64'h0,      /// PL DDR size
  parameter bit          HasOcm = 1'b0,          /// instantiate the on-chip memory
  parameter logic [63:0] OcmBase = 64'h0,        /// OCM base
  parameter logic [63:0] OcmSize = 64'h0,        /// OCM size
  parameter int unsigned BusBytes = DmaDataWidth / 8,  /// DMA bytes per beat
  parameter int unsigned AddrWidth = DmaAddrWidth,     /// DMA address bits
  parameter int unsigned IdWidth = 4,                  /// AXI ID bits
  localparam int unsigned DataWidth = BusBytes * 8
) (
  input  wire                  clk_i,            /// clock
  input  wire                  rst_ni,           /// asynchronous reset, active low
  // AXI4-Lite slave: register access from the CPU.
  output logic                 s_axil_awready,
  input  wire                  s_axil_awvalid,
  input  wire  [31:0]          s_axil_awaddr,
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
  input  wire  [31:0]          s_axil_araddr,
  input  wire  [2:0]           s_axil_arprot,
  input  wire                  s_axil_rready,
  output logic                 s_axil_rvalid,
  output logic [31:0]          s_axil_rdata,
  output logic [1:0]           s_axil_rresp,
  // AXI4 masters to the external memories: [0] PS DDR, [1] PL DDR. Payload shared.
  output logic [IdWidth-1:0]   m_axi_arid,
  output logic [AddrWidth-1:0] m_axi_araddr,
  output logic [7:0]           m_axi_arlen,
  output logic [2:0]           m_axi_arsize,
  output logic [1:0]           m_axi_arburst,
  output logic [1:0]           m_axi_arvalid,
  input  wire  [1:0]           m_axi_arready,
  input  wire  [1:0][IdWidth-1:0]   m_axi_rid,
  input  wire  [1:0][DataWidth-1:0] m_axi_rdata,
  input  wire  [1:0][1:0]      m_axi_rresp,
  input  wire  [1:0]           m_axi_rlast,
  input  wire  [1:0]           m_axi_rvalid,
  output logic [1:0]           m_axi_rready,
  output logic [IdWidth-1:0]   m_axi_awid,
  output logic [AddrWidth-1:0] m_axi_awaddr,
  output logic [7:0]           m_axi_awlen,
  output logic [2:0]           m_axi_awsize,
  output logic [1:0]           m_axi_awburst,
  output logic [1:0]           m_axi_awvalid,
  input  wire  [1:0]           m_axi_awready,
  output logic [DataWidth-1:0] m_axi_wdata,
  output logic [BusBytes-1:0]  m_axi_wstrb,
  output logic                 m_axi_wlast,
  output logic [1:0]           m_axi_wvalid,
  input  wire  [1:0]           m_axi_wready,
  input  wire  [1:0][IdWidth-1:0] m_axi_bid,
  input  wire  [1:0][1:0]      m_axi_bresp,
  input  wire  [1:0]           m_axi_bvalid,
  output logic [1:0]           m_axi_bready,
  output logic                 irq_o,            /// level interrupt of the whole NPU
  output logic [1:0]           irq_src_o,        /// irq_o's sources {NPU block, DMA} (debug)
  // Faults on the memory interconnect, from the simulation top's fault controller
  // (rtl/sim/npu_fault_ctl.sv, npu_fault_axi); a chip ties fault_mode_i to 0.
  input  wire  [1:0]           fault_mode_i,     /// 0 off, 1 error, 2 stall, 3 bit flip
  input  wire  [1:0]           fault_resp_i,     /// error response
  input  wire  [1:0]           fault_unit_i,     /// 0 any master, 1 DMA, 2 compute engine
  input  wire                  fault_reads_i,    /// read bursts count
  input  wire                  fault_writes_i,   /// write bursts count
  input  wire  [63:0]          fault_base_i,     /// the range's first byte
  input  wire  [63:0]          fault_size_i,     /// the range's bytes
  input  wire  [2:0]           fault_bit_i,      /// the bit a flip flips
  input  wire                  fault_release_i,  /// a stalled burst may go
  output logic [1:0]           fault_event_o,    /// {AW, AR} bursts that count this cycle
  input  wire  [1:0]           fault_fire_i,     /// the fault fires on them
  output logic                 busy_o            /// an engine is running (DMA now, compute later)
);
  // Demux ports: 0 udma, 1 plddr, 2 OCM (size 0 without one: never decoded).
  localparam int unsigned NumMem = 3;
  localparam logic [63:0] OcmSizeEff = HasOcm ? OcmSize : 64'h0;

  // The buses inside, as request/response structs (npu_axi_typedef.svh): AXI4 for the
  // data path, AXI4-Lite with 32-bit addresses from the CPU and 12-bit block offsets
  // behind the register demux.
  typedef logic [AddrWidth-1:0] addr_t;
  typedef logic [IdWidth-1:0]   id_t;
  typedef logic [DataWidth-1:0] data_t;
  typedef logic [BusBytes-1:0]  strb_t;
  `NPU_AXI_TYPEDEF_ALL(axi, addr_t, id_t, data_t, strb_t)
  typedef logic [31:0] cpu_addr_t;
  typedef logic [11:0] reg_addr_t;
  typedef logic [31:0] reg_data_t;
  typedef logic [3:0]  reg_strb_t;
  `NPU_AXIL_TYPEDEF_ALL(cpu, cpu_addr_t, reg_data_t, reg_strb_t)
  `NPU_AXIL_TYPEDEF_ALL(reg, reg_addr_t, reg_data_t, reg_strb_t)

  // ---------------------------------------------------------------- registers
  cpu_req_t       cpu_req;
  cpu_rsp_t       cpu_rsp;
  reg_req_t [1:0] reg_req;  // [0] npu_regs, [1] npu_dma
  reg_rsp_t [1:0] reg_rsp;
  `NPU_AXIL_ASSIGN_FROM_FLAT(s_axil, cpu_req, cpu_rsp)

  npu_axil_demux #(
    .Base0(NpuBase), .Base1(DmaBase), .BlockSize(32'h1000),
    .slv_req_t(cpu_req_t), .slv_rsp_t(cpu_rsp_t), .mst_req_t(reg_req_t), .mst_rsp_t(reg_rsp_t)
  ) u_axil_demux (
    .clk_i, .rst_ni, .slv_req_i(cpu_req), .slv_rsp_o(cpu_rsp),
    .mst_req_o(reg_req), .mst_rsp_i(reg_rsp)
  );

  logic dma_busy, dma_irq, npu_irq;

  // Compute engine control and status (through npu_regs).
  logic        c_start, c_abort, c_wipe, c_wiping, c_busy, c_done, c_error;
  logic        c_done_ev, c_error_ev;
  logic [63:0] c_prog_addr, c_err_addr;
  logic [31:0] c_prog_insns, c_err_pc;
  logic [15:0][63:0] c_base;
  npu_isa_pkg::err_e c_err_code;
  logic [1:0]  c_err_unit;
  logic [npu_config_pkg::NumPerf-1:0][63:0] c_perf;

  npu_regs #(
    .TargetId(TargetId), .HwVersionMajor(HwVersionMajor), .HwVersionMinor(HwVersionMinor),
    .HwVersionPatch(HwVersionPatch), .DmaBusBytes(BusBytes), .HasCompute(1'b1),
    .UdmaBase(UdmaBase), .UdmaSize(UdmaSize), .PlddrBase(PlddrBase), .PlddrSize(PlddrSize),
    .OcmBase(HasOcm ? OcmBase : 64'h0), .OcmSize(OcmSizeEff),
    .CoreBlock(NpuBlock), .CoreLutTables(NpuLutTables), .CoreBaseRegs(NpuBaseRegs),
    .CoreTokenDepth(NpuTokenDepth), .CoreInpRows(NpuInpRows), .CoreWgtRows(NpuWgtRows),
    .CoreAccRows(NpuAccRows), .CorePrmRows(NpuPrmRows), .req_t(reg_req_t), .rsp_t(reg_rsp_t)
  ) u_regs (
    .clk_i, .rst_ni, .s_axil_req_i(reg_req[0]), .s_axil_rsp_o(reg_rsp[0]),
    .dma_busy_i(dma_busy),
    .core_start_o(c_start), .core_abort_o(c_abort), .core_wipe_o(c_wipe),
    .core_prog_addr_o(c_prog_addr),
    .core_prog_insns_o(c_prog_insns), .core_base_o(c_base),
    .core_busy_i(c_busy), .core_done_i(c_done), .core_error_i(c_error),
    .core_wiping_i(c_wiping),
    .core_err_code_i(c_err_code), .core_err_unit_i(c_err_unit), .core_err_pc_i(c_err_pc),
    .core_err_addr_i(c_err_addr), .core_done_event_i(c_done_ev),
    .core_error_event_i(c_error_ev), .core_perf_i(c_perf),
    .irq_o(npu_irq)
  );

  // ---------------------------------------------------------------- masters
  axi_req_t [1:0] eng_req;  // [0] DMA, [1] compute engine
  axi_rsp_t [1:0] eng_rsp;

  npu_dma #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth),
    .MaxBurstBeats(DmaMaxBurstBeats), .MaxOutstanding(DmaMaxOutstanding),
    .FifoDepth(DmaFifoDepth),
    .Mem0Base(UdmaBase), .Mem0Size(UdmaSize), .Mem1Base(PlddrBase), .Mem1Size(PlddrSize),
    .Mem2Base(OcmBase), .Mem2Size(OcmSizeEff),
    .HwVersionMajor(HwVersionMajor), .HwVersionMinor(HwVersionMinor),
    .HwVersionPatch(HwVersionPatch),
    .axil_req_t(reg_req_t), .axil_rsp_t(reg_rsp_t), .axi_req_t(axi_req_t), .axi_rsp_t(axi_rsp_t)
  ) u_dma (
    .clk_i, .rst_ni, .s_axil_req_i(reg_req[1]), .s_axil_rsp_o(reg_rsp[1]),
    .m_axi_req_o(eng_req[0]), .m_axi_rsp_i(eng_rsp[0]), .irq_o(dma_irq), .busy_o(dma_busy)
  );

  npu_cmp_core #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
    .MaxBurstBeats(DmaMaxBurstBeats), .MaxOutstanding(DmaMaxOutstanding),
    .Block(NpuBlock), .InpRows(NpuInpRows), .WgtRows(NpuWgtRows), .AccRows(NpuAccRows),
    .PrmRows(NpuPrmRows), .LutTables(NpuLutTables), .QueueDepth(NpuInsnQueueDepth),
    .TokenDepth(NpuTokenDepth), .WatchdogCycles(NpuWatchdogCycles),
    .Mem0Base(UdmaBase), .Mem0Size(UdmaSize), .Mem1Base(PlddrBase), .Mem1Size(PlddrSize),
    .Mem2Base(OcmBase), .Mem2Size(OcmSizeEff),
    .aw_chan_t(axi_aw_chan_t), .w_chan_t(axi_w_chan_t), .b_chan_t(axi_b_chan_t),
    .req_t(axi_req_t), .rsp_t(axi_rsp_t)
  ) u_core (
    .clk_i, .rst_ni,
    .start_i(c_start), .abort_i(c_abort), .wipe_i(c_wipe), .prog_addr_i(c_prog_addr),
    .prog_insns_i(c_prog_insns), .base_i(c_base),
    .busy_o(c_busy), .wiping_o(c_wiping), .done_o(c_done), .error_o(c_error),
    .err_code_o(c_err_code), .err_unit_o(c_err_unit), .err_pc_o(c_err_pc),
    .err_addr_o(c_err_addr), .done_event_o(c_done_ev), .error_event_o(c_error_ev),
    .perf_o(c_perf), .m_axi_req_o(eng_req[1]), .m_axi_rsp_i(eng_rsp[1])
  );

  assign irq_o = npu_irq || dma_irq;
  assign irq_src_o = {npu_irq, dma_irq};
  assign busy_o = dma_busy || c_busy;

  // ---------------------------------------------------------------- memory interconnect
  axi_req_t              mux_req;
  axi_rsp_t              mux_rsp;
  axi_req_t [NumMem-1:0] mem_req;
  axi_rsp_t [NumMem-1:0] mem_rsp;

  npu_axi_mux #(
    .MaxOutstanding(DmaMaxOutstanding), .aw_chan_t(axi_aw_chan_t), .ar_chan_t(axi_ar_chan_t),
    .req_t(axi_req_t), .rsp_t(axi_rsp_t)
  ) u_axi_mux (
    .clk_i, .rst_ni, .slv_req_i(eng_req), .slv_rsp_o(eng_rsp),
    .mst_req_o(mux_req), .mst_rsp_i(mux_rsp)
  );

  // Every burst of both masters to every memory passes here (the ID's top bit names the
  // master, the demux answers in request order): faults on cue act on all of them.
  axi_req_t flt_req;
  axi_rsp_t flt_rsp;
  npu_fault_axi #(
    .BusBytes(BusBytes), .IdWidth(IdWidth), .Depth(4 * DmaMaxOutstanding),
    .req_t(axi_req_t), .rsp_t(axi_rsp_t)
  ) u_fault (
    .clk_i, .rst_ni, .mode_i(fault_mode_i), .resp_i(fault_resp_i), .unit_i(fault_unit_i),
    .reads_i(fault_reads_i), .writes_i(fault_writes_i), .base_i(fault_base_i),
    .size_i(fault_size_i), .bit_i(fault_bit_i), .release_i(fault_release_i),
    .event_o(fault_event_o), .fire_i(fault_fire_i), .s_req_i(mux_req), .s_rsp_o(mux_rsp),
    .m_req_o(flt_req), .m_rsp_i(flt_rsp)
  );

  npu_axi_demux #(
    .NumSlaves(NumMem), .MaxOutstanding(DmaMaxOutstanding),
    .SlaveBase({OcmBase, PlddrBase, UdmaBase}), .SlaveSize({OcmSizeEff, PlddrSize, UdmaSize}),
    .req_t(axi_req_t), .rsp_t(axi_rsp_t)
  ) u_axi_demux (
    .clk_i, .rst_ni, .slv_req_i(flt_req), .slv_rsp_o(flt_rsp),
    .mst_req_o(mem_req), .mst_rsp_i(mem_rsp)
  );

  // External memories are demux ports 0 and 1: payloads from port 0 (the demux broadcasts
  // them), valids and readies per memory.
  assign m_axi_awid    = mem_req[0].aw.id;
  assign m_axi_awaddr  = mem_req[0].aw.addr;
  assign m_axi_awlen   = mem_req[0].aw.len;
  assign m_axi_awsize  = mem_req[0].aw.size;
  assign m_axi_awburst = mem_req[0].aw.burst;
  assign m_axi_wdata   = mem_req[0].w.data;
  assign m_axi_wstrb   = mem_req[0].w.strb;
  assign m_axi_wlast   = mem_req[0].w.last;
  assign m_axi_arid    = mem_req[0].ar.id;
  assign m_axi_araddr  = mem_req[0].ar.addr;
  assign m_axi_arlen   = mem_req[0].ar.len;
  assign m_axi_arsize  = mem_req[0].ar.size;
  assign m_axi_arburst = mem_req[0].ar.burst;
  for (genvar m = 0; m < 2; m++) begin : g_ext
    assign m_axi_awvalid[m] = mem_req[m].aw_valid;
    assign m_axi_wvalid[m]  = mem_req[m].w_valid;
    assign m_axi_bready[m]  = mem_req[m].b_ready;
    assign m_axi_arvalid[m] = mem_req[m].ar_valid;
    assign m_axi_rready[m]  = mem_req[m].r_ready;
    assign mem_rsp[m] = '{
      aw_ready: m_axi_awready[m], w_ready: m_axi_wready[m],
      b: '{id: m_axi_bid[m], resp: m_axi_bresp[m]}, b_valid: m_axi_bvalid[m],
      ar_ready: m_axi_arready[m],
      r: '{id: m_axi_rid[m], data: m_axi_rdata[m], resp: m_axi_rresp[m], last: m_axi_rlast[m]},
      r_valid: m_axi_rvalid[m]
    };
  end

  if (HasOcm) begin : g_ocm
    npu_axi_mem #(
      .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
      .Base(OcmBase), .Size(OcmSize), .UseDpi(1'b0), .Name("ocm"),
      .MaxOutstanding(DmaMaxOutstanding), .req_t(axi_req_t), .rsp_t(axi_rsp_t)
    ) u_ocm (
      .clk_i, .rst_ni,
      .fault_base_i('0), .fault_size_i('0), .fault_resp_i('0),
      .s_req_i(mem_req[2]), .s_rsp_o(mem_rsp[2])
    );
  end else begin : g_no_ocm
    assign mem_rsp[2] = '0;
    logic unused;
    assign unused = ^{mem_req[2].aw_valid, mem_req[2].w_valid, mem_req[2].b_ready,
                      mem_req[2].ar_valid, mem_req[2].r_ready};
  end
endmodule

`default_nettype wire
