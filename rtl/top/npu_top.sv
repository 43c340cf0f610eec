`default_nettype none

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
  output logic                 busy_o            /// an engine is running (DMA now, compute later)
);
  // Demux ports: 0 udma, 1 plddr, 2 OCM (size 0 without one: never decoded).
  localparam int unsigned NumMem = 3;
  localparam logic [63:0] OcmSizeEff = HasOcm ? OcmSize : 64'h0;

  // ---------------------------------------------------------------- registers
  logic [11:0]      r_awaddr, r_araddr;
  logic [2:0]       r_awprot, r_arprot;
  logic [31:0]      r_wdata;
  logic [3:0]       r_wstrb;
  logic [1:0]       r_awvalid, r_awready, r_wvalid, r_wready, r_bvalid, r_bready;
  logic [1:0]       r_arvalid, r_arready, r_rvalid, r_rready;
  logic [1:0][1:0]  r_bresp, r_rresp;
  logic [1:0][31:0] r_rdata;

  npu_axil_demux #(.Base0(NpuBase), .Base1(DmaBase), .BlockSize(32'h1000)) u_axil_demux (
    .clk_i, .rst_ni,
    .s_awready(s_axil_awready), .s_awvalid(s_axil_awvalid), .s_awaddr(s_axil_awaddr),
    .s_awprot(s_axil_awprot), .s_wready(s_axil_wready), .s_wvalid(s_axil_wvalid),
    .s_wdata(s_axil_wdata), .s_wstrb(s_axil_wstrb), .s_bready(s_axil_bready),
    .s_bvalid(s_axil_bvalid), .s_bresp(s_axil_bresp), .s_arready(s_axil_arready),
    .s_arvalid(s_axil_arvalid), .s_araddr(s_axil_araddr), .s_arprot(s_axil_arprot),
    .s_rready(s_axil_rready), .s_rvalid(s_axil_rvalid), .s_rdata(s_axil_rdata),
    .s_rresp(s_axil_rresp),
    .m_awaddr(r_awaddr), .m_awprot(r_awprot), .m_awvalid(r_awvalid), .m_awready(r_awready),
    .m_wdata(r_wdata), .m_wstrb(r_wstrb), .m_wvalid(r_wvalid), .m_wready(r_wready),
    .m_bvalid(r_bvalid), .m_bresp(r_bresp), .m_bready(r_bready),
    .m_araddr(r_araddr), .m_arprot(r_arprot), .m_arvalid(r_arvalid), .m_arready(r_arready),
    .m_rvalid(r_rvalid), .m_rdata(r_rdata), .m_rresp(r_rresp), .m_rready(r_rready)
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
    .CoreAccRows(NpuAccRows), .CorePrmRows(NpuPrmRows)
  ) u_regs (
    .clk_i, .rst_ni,
    .s_axil_awready(r_awready[0]), .s_axil_awvalid(r_awvalid[0]), .s_axil_awaddr(r_awaddr),
    .s_axil_awprot(r_awprot), .s_axil_wready(r_wready[0]), .s_axil_wvalid(r_wvalid[0]),
    .s_axil_wdata(r_wdata), .s_axil_wstrb(r_wstrb), .s_axil_bready(r_bready[0]),
    .s_axil_bvalid(r_bvalid[0]), .s_axil_bresp(r_bresp[0]), .s_axil_arready(r_arready[0]),
    .s_axil_arvalid(r_arvalid[0]), .s_axil_araddr(r_araddr), .s_axil_arprot(r_arprot),
    .s_axil_rready(r_rready[0]), .s_axil_rvalid(r_rvalid[0]), .s_axil_rdata(r_rdata[0]),
    .s_axil_rresp(r_rresp[0]),
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

  // ---------------------------------------------------------------- DMA
  logic [IdWidth-1:0]   d_arid, d_rid, d_awid, d_bid;
  logic [AddrWidth-1:0] d_araddr, d_awaddr;
  logic [7:0]           d_arlen, d_awlen;
  logic [2:0]           d_arsize, d_awsize;
  logic [1:0]           d_arburst, d_awburst, d_rresp, d_bresp;
  logic                 d_arvalid, d_arready, d_rlast, d_rvalid, d_rready;
  logic                 d_awvalid, d_awready, d_wlast, d_wvalid, d_wready;
  logic                 d_bvalid, d_bready;
  logic [DataWidth-1:0] d_rdata, d_wdata;
  logic [BusBytes-1:0]  d_wstrb;

  npu_dma #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
    .MaxBurstBeats(DmaMaxBurstBeats), .MaxOutstanding(DmaMaxOutstanding),
    .FifoDepth(DmaFifoDepth),
    .Mem0Base(UdmaBase), .Mem0Size(UdmaSize), .Mem1Base(PlddrBase), .Mem1Size(PlddrSize),
    .Mem2Base(OcmBase), .Mem2Size(OcmSizeEff),
    .HwVersionMajor(HwVersionMajor), .HwVersionMinor(HwVersionMinor),
    .HwVersionPatch(HwVersionPatch)
  ) u_dma (
    .clk_i, .rst_ni,
    .s_axil_awready(r_awready[1]), .s_axil_awvalid(r_awvalid[1]), .s_axil_awaddr(r_awaddr),
    .s_axil_awprot(r_awprot), .s_axil_wready(r_wready[1]), .s_axil_wvalid(r_wvalid[1]),
    .s_axil_wdata(r_wdata), .s_axil_wstrb(r_wstrb), .s_axil_bready(r_bready[1]),
    .s_axil_bvalid(r_bvalid[1]), .s_axil_bresp(r_bresp[1]), .s_axil_arready(r_arready[1]),
    .s_axil_arvalid(r_arvalid[1]), .s_axil_araddr(r_araddr), .s_axil_arprot(r_arprot),
    .s_axil_rready(r_rready[1]), .s_axil_rvalid(r_rvalid[1]), .s_axil_rdata(r_rdata[1]),
    .s_axil_rresp(r_rresp[1]),
    .m_axi_arid(d_arid), .m_axi_araddr(d_araddr), .m_axi_arlen(d_arlen),
    .m_axi_arsize(d_arsize), .m_axi_arburst(d_arburst), .m_axi_arcache(),
    .m_axi_arprot(), .m_axi_arvalid(d_arvalid), .m_axi_arready(d_arready),
    .m_axi_rid(d_rid), .m_axi_rdata(d_rdata), .m_axi_rresp(d_rresp), .m_axi_rlast(d_rlast),
    .m_axi_rvalid(d_rvalid), .m_axi_rready(d_rready),
    .m_axi_awid(d_awid), .m_axi_awaddr(d_awaddr), .m_axi_awlen(d_awlen),
    .m_axi_awsize(d_awsize), .m_axi_awburst(d_awburst), .m_axi_awcache(),
    .m_axi_awprot(), .m_axi_awvalid(d_awvalid), .m_axi_awready(d_awready),
    .m_axi_wdata(d_wdata), .m_axi_wstrb(d_wstrb), .m_axi_wlast(d_wlast),
    .m_axi_wvalid(d_wvalid), .m_axi_wready(d_wready),
    .m_axi_bid(d_bid), .m_axi_bresp(d_bresp), .m_axi_bvalid(d_bvalid), .m_axi_bready(d_bready),
    .irq_o(dma_irq), .busy_o(dma_busy)
  );

  // ---------------------------------------------------------------- compute engine
  logic [IdWidth-1:0]   e_arid, e_rid, e_awid, e_bid;
  logic [AddrWidth-1:0] e_araddr, e_awaddr;
  logic [7:0]           e_arlen, e_awlen;
  logic [2:0]           e_arsize, e_awsize;
  logic [1:0]           e_arburst, e_awburst, e_rresp, e_bresp;
  logic                 e_arvalid, e_arready, e_rlast, e_rvalid, e_rready;
  logic                 e_awvalid, e_awready, e_wlast, e_wvalid, e_wready;
  logic                 e_bvalid, e_bready;
  logic [DataWidth-1:0] e_rdata, e_wdata;
  logic [BusBytes-1:0]  e_wstrb;

  npu_cmp_core #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
    .MaxBurstBeats(DmaMaxBurstBeats), .MaxOutstanding(DmaMaxOutstanding),
    .Block(NpuBlock), .InpRows(NpuInpRows), .WgtRows(NpuWgtRows), .AccRows(NpuAccRows),
    .PrmRows(NpuPrmRows), .LutTables(NpuLutTables), .QueueDepth(NpuInsnQueueDepth),
    .TokenDepth(NpuTokenDepth), .WatchdogCycles(NpuWatchdogCycles),
    .Mem0Base(UdmaBase), .Mem0Size(UdmaSize), .Mem1Base(PlddrBase), .Mem1Size(PlddrSize),
    .Mem2Base(OcmBase), .Mem2Size(OcmSizeEff)
  ) u_core (
    .clk_i, .rst_ni,
    .start_i(c_start), .abort_i(c_abort), .wipe_i(c_wipe), .prog_addr_i(c_prog_addr),
    .prog_insns_i(c_prog_insns), .base_i(c_base),
    .busy_o(c_busy), .wiping_o(c_wiping), .done_o(c_done), .error_o(c_error), .err_code_o(c_err_code),
    .err_unit_o(c_err_unit), .err_pc_o(c_err_pc), .err_addr_o(c_err_addr),
    .done_event_o(c_done_ev), .error_event_o(c_error_ev), .perf_o(c_perf),
    .m_axi_arid(e_arid), .m_axi_araddr(e_araddr), .m_axi_arlen(e_arlen),
    .m_axi_arsize(e_arsize), .m_axi_arburst(e_arburst), .m_axi_arvalid(e_arvalid),
    .m_axi_arready(e_arready),
    .m_axi_rid(e_rid), .m_axi_rdata(e_rdata), .m_axi_rresp(e_rresp), .m_axi_rlast(e_rlast),
    .m_axi_rvalid(e_rvalid), .m_axi_rready(e_rready),
    .m_axi_awid(e_awid), .m_axi_awaddr(e_awaddr), .m_axi_awlen(e_awlen),
    .m_axi_awsize(e_awsize), .m_axi_awburst(e_awburst), .m_axi_awvalid(e_awvalid),
    .m_axi_awready(e_awready),
    .m_axi_wdata(e_wdata), .m_axi_wstrb(e_wstrb), .m_axi_wlast(e_wlast),
    .m_axi_wvalid(e_wvalid), .m_axi_wready(e_wready),
    .m_axi_bid(e_bid), .m_axi_bresp(e_bresp), .m_axi_bvalid(e_bvalid), .m_axi_bready(e_bready)
  );

  assign irq_o = npu_irq || dma_irq;
  assign busy_o = dma_busy || c_busy;

  // ---------------------------------------------------------------- masters -> one path
  logic [IdWidth-1:0]   a_arid, a_rid, a_awid, a_bid;
  logic [AddrWidth-1:0] a_araddr, a_awaddr;
  logic [7:0]           a_arlen, a_awlen;
  logic [2:0]           a_arsize, a_awsize;
  logic [1:0]           a_arburst, a_awburst, a_rresp, a_bresp;
  logic                 a_arvalid, a_arready, a_rlast, a_rvalid, a_rready;
  logic                 a_awvalid, a_awready, a_wlast, a_wvalid, a_wready;
  logic                 a_bvalid, a_bready;
  logic [DataWidth-1:0] a_rdata, a_wdata;
  logic [BusBytes-1:0]  a_wstrb;
  logic [1:0]           mx_rvalid, mx_bvalid;
  logic [IdWidth-1:0]   mx_rid, mx_bid;
  logic [DataWidth-1:0] mx_rdata;
  logic [1:0]           mx_rresp, mx_bresp;
  logic                 mx_rlast;

  npu_axi_mux #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
    .MaxOutstanding(DmaMaxOutstanding)
  ) u_axi_mux (
    .clk_i, .rst_ni,
    .s_arid({e_arid, d_arid}), .s_araddr({e_araddr, d_araddr}), .s_arlen({e_arlen, d_arlen}),
    .s_arsize({e_arsize, d_arsize}), .s_arburst({e_arburst, d_arburst}),
    .s_arvalid({e_arvalid, d_arvalid}), .s_arready({e_arready, d_arready}),
    .s_rid(mx_rid), .s_rdata(mx_rdata), .s_rresp(mx_rresp), .s_rlast(mx_rlast),
    .s_rvalid(mx_rvalid), .s_rready({e_rready, d_rready}),
    .s_awid({e_awid, d_awid}), .s_awaddr({e_awaddr, d_awaddr}), .s_awlen({e_awlen, d_awlen}),
    .s_awsize({e_awsize, d_awsize}), .s_awburst({e_awburst, d_awburst}),
    .s_awvalid({e_awvalid, d_awvalid}), .s_awready({e_awready, d_awready}),
    .s_wdata({e_wdata, d_wdata}), .s_wstrb({e_wstrb, d_wstrb}), .s_wlast({e_wlast, d_wlast}),
    .s_wvalid({e_wvalid, d_wvalid}), .s_wready({e_wready, d_wready}),
    .s_bid(mx_bid), .s_bresp(mx_bresp), .s_bvalid(mx_bvalid), .s_bready({e_bready, d_bready}),
    .m_arid(a_arid), .m_araddr(a_araddr), .m_arlen(a_arlen), .m_arsize(a_arsize),
    .m_arburst(a_arburst), .m_arvalid(a_arvalid), .m_arready(a_arready),
    .m_rid(a_rid), .m_rdata(a_rdata), .m_rresp(a_rresp), .m_rlast(a_rlast),
    .m_rvalid(a_rvalid), .m_rready(a_rready),
    .m_awid(a_awid), .m_awaddr(a_awaddr), .m_awlen(a_awlen), .m_awsize(a_awsize),
    .m_awburst(a_awburst), .m_awvalid(a_awvalid), .m_awready(a_awready),
    .m_wdata(a_wdata), .m_wstrb(a_wstrb), .m_wlast(a_wlast), .m_wvalid(a_wvalid),
    .m_wready(a_wready),
    .m_bid(a_bid), .m_bresp(a_bresp), .m_bvalid(a_bvalid), .m_bready(a_bready)
  );
  assign {d_rid, e_rid}     = {mx_rid, mx_rid};
  assign {d_rdata, e_rdata} = {mx_rdata, mx_rdata};
  assign {d_rresp, e_rresp} = {mx_rresp, mx_rresp};
  assign {d_rlast, e_rlast} = {mx_rlast, mx_rlast};
  assign {e_rvalid, d_rvalid} = mx_rvalid;
  assign {d_bid, e_bid}     = {mx_bid, mx_bid};
  assign {d_bresp, e_bresp} = {mx_bresp, mx_bresp};
  assign {e_bvalid, d_bvalid} = mx_bvalid;

  // ---------------------------------------------------------------- memory interconnect
  logic [NumMem-1:0]                x_arvalid, x_arready, x_rlast, x_rvalid, x_rready;
  logic [NumMem-1:0]                x_awvalid, x_awready, x_wvalid, x_wready, x_bvalid, x_bready;
  logic [NumMem-1:0][IdWidth-1:0]   x_rid, x_bid;
  logic [NumMem-1:0][DataWidth-1:0] x_rdata;
  logic [NumMem-1:0][1:0]           x_rresp, x_bresp;

  npu_axi_demux #(
    .NumSlaves(NumMem), .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
    .MaxOutstanding(DmaMaxOutstanding),
    .SlaveBase({OcmBase, PlddrBase, UdmaBase}),
    .SlaveSize({OcmSizeEff, PlddrSize, UdmaSize})
  ) u_axi_demux (
    .clk_i, .rst_ni,
    .s_arid(a_arid), .s_araddr(a_araddr), .s_arlen(a_arlen), .s_arsize(a_arsize),
    .s_arburst(a_arburst), .s_arvalid(a_arvalid), .s_arready(a_arready),
    .s_rid(a_rid), .s_rdata(a_rdata), .s_rresp(a_rresp), .s_rlast(a_rlast),
    .s_rvalid(a_rvalid), .s_rready(a_rready),
    .s_awid(a_awid), .s_awaddr(a_awaddr), .s_awlen(a_awlen), .s_awsize(a_awsize),
    .s_awburst(a_awburst), .s_awvalid(a_awvalid), .s_awready(a_awready),
    .s_wdata(a_wdata), .s_wstrb(a_wstrb), .s_wlast(a_wlast), .s_wvalid(a_wvalid),
    .s_wready(a_wready),
    .s_bid(a_bid), .s_bresp(a_bresp), .s_bvalid(a_bvalid), .s_bready(a_bready),
    .m_arid(m_axi_arid), .m_araddr(m_axi_araddr), .m_arlen(m_axi_arlen),
    .m_arsize(m_axi_arsize), .m_arburst(m_axi_arburst), .m_arvalid(x_arvalid),
    .m_arready(x_arready),
    .m_rid(x_rid), .m_rdata(x_rdata), .m_rresp(x_rresp), .m_rlast(x_rlast),
    .m_rvalid(x_rvalid), .m_rready(x_rready),
    .m_awid(m_axi_awid), .m_awaddr(m_axi_awaddr), .m_awlen(m_axi_awlen),
    .m_awsize(m_axi_awsize), .m_awburst(m_axi_awburst), .m_awvalid(x_awvalid),
    .m_awready(x_awready),
    .m_wdata(m_axi_wdata), .m_wstrb(m_axi_wstrb), .m_wlast(m_axi_wlast),
    .m_wvalid(x_wvalid), .m_wready(x_wready),
    .m_bid(x_bid), .m_bresp(x_bresp), .m_bvalid(x_bvalid), .m_bready(x_bready)
  );

  // External memories are demux ports 0 and 1.
  assign m_axi_arvalid    = x_arvalid[1:0];
  assign x_arready[1:0]   = m_axi_arready;
  assign x_rid[1:0]       = m_axi_rid;
  assign x_rdata[1:0]     = m_axi_rdata;
  assign x_rresp[1:0]     = m_axi_rresp;
  assign x_rlast[1:0]     = m_axi_rlast;
  assign x_rvalid[1:0]    = m_axi_rvalid;
  assign m_axi_rready     = x_rready[1:0];
  assign m_axi_awvalid    = x_awvalid[1:0];
  assign x_awready[1:0]   = m_axi_awready;
  assign m_axi_wvalid     = x_wvalid[1:0];
  assign x_wready[1:0]    = m_axi_wready;
  assign x_bid[1:0]       = m_axi_bid;
  assign x_bresp[1:0]     = m_axi_bresp;
  assign x_bvalid[1:0]    = m_axi_bvalid;
  assign m_axi_bready     = x_bready[1:0];

  if (HasOcm) begin : g_ocm
    npu_axi_mem #(
      .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
      .Base(OcmBase), .Size(OcmSize), .UseDpi(1'b0), .Name("ocm"),
      .MaxOutstanding(DmaMaxOutstanding)
    ) u_ocm (
      .clk_i, .rst_ni,
      .fault_base_i('0), .fault_size_i('0), .fault_resp_i('0),
      .s_axi_arid(m_axi_arid), .s_axi_araddr(m_axi_araddr), .s_axi_arlen(m_axi_arlen),
      .s_axi_arsize(m_axi_arsize), .s_axi_arburst(m_axi_arburst),
      .s_axi_arvalid(x_arvalid[2]), .s_axi_arready(x_arready[2]),
      .s_axi_rid(x_rid[2]), .s_axi_rdata(x_rdata[2]), .s_axi_rresp(x_rresp[2]),
      .s_axi_rlast(x_rlast[2]), .s_axi_rvalid(x_rvalid[2]), .s_axi_rready(x_rready[2]),
      .s_axi_awid(m_axi_awid), .s_axi_awaddr(m_axi_awaddr), .s_axi_awlen(m_axi_awlen),
      .s_axi_awsize(m_axi_awsize), .s_axi_awburst(m_axi_awburst),
      .s_axi_awvalid(x_awvalid[2]), .s_axi_awready(x_awready[2]),
      .s_axi_wdata(m_axi_wdata), .s_axi_wstrb(m_axi_wstrb), .s_axi_wlast(m_axi_wlast),
      .s_axi_wvalid(x_wvalid[2]), .s_axi_wready(x_wready[2]),
      .s_axi_bid(x_bid[2]), .s_axi_bresp(x_bresp[2]), .s_axi_bvalid(x_bvalid[2]),
      .s_axi_bready(x_bready[2])
    );
  end else begin : g_no_ocm
    assign x_arready[2] = 1'b0;
    assign x_rid[2]     = '0;
    assign x_rdata[2]   = '0;
    assign x_rresp[2]   = '0;
    assign x_rlast[2]   = 1'b0;
    assign x_rvalid[2]  = 1'b0;
    assign x_awready[2] = 1'b0;
    assign x_wready[2]  = 1'b0;
    assign x_bid[2]     = '0;
    assign x_bresp[2]   = '0;
    assign x_bvalid[2]  = 1'b0;
    logic unused;
    assign unused = ^{x_arvalid[2], x_rready[2], x_awvalid[2], x_wvalid[2], x_bready[2]};
  end
endmodule

`default_nettype wire
