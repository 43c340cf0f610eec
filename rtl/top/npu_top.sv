`default_nettype none

/// The NPU, shared by both targets (`npu_buyi`, `npu_zg330` set its parameters).
///
///   s_axil (CPU, 32-bit addresses) -> npu_axil_demux -+-> npu_regs  (NpuBase, 4 KiB)
///                                                     +-> npu_dma   (DmaBase, 4 KiB)
///   npu_dma AXI4 master -> npu_axi_demux -+-> m_axi_ps_*  PS DDR window (udma)
///                                         +-> m_axi_pl_*  PL DDR (plddr)
///                                         +-> OCM         on-chip SRAM (when HasOcm)
///                                         +-> DECERR      anything else
///
/// The compute engine (a later issue) becomes a second AXI master beside the DMA, in front
/// of the same memories, and a third interrupt source in npu_regs.
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

  npu_regs #(
    .TargetId(TargetId), .HwVersionMajor(HwVersionMajor), .HwVersionMinor(HwVersionMinor),
    .HwVersionPatch(HwVersionPatch), .DmaBusBytes(BusBytes), .HasCompute(1'b0),
    .UdmaBase(UdmaBase), .UdmaSize(UdmaSize), .PlddrBase(PlddrBase), .PlddrSize(PlddrSize),
    .OcmBase(HasOcm ? OcmBase : 64'h0), .OcmSize(OcmSizeEff)
  ) u_regs (
    .clk_i, .rst_ni,
    .s_axil_awready(r_awready[0]), .s_axil_awvalid(r_awvalid[0]), .s_axil_awaddr(r_awaddr),
    .s_axil_awprot(r_awprot), .s_axil_wready(r_wready[0]), .s_axil_wvalid(r_wvalid[0]),
    .s_axil_wdata(r_wdata), .s_axil_wstrb(r_wstrb), .s_axil_bready(r_bready[0]),
    .s_axil_bvalid(r_bvalid[0]), .s_axil_bresp(r_bresp[0]), .s_axil_arready(r_arready[0]),
    .s_axil_arvalid(r_arvalid[0]), .s_axil_araddr(r_araddr), .s_axil_arprot(r_arprot),
    .s_axil_rready(r_rready[0]), .s_axil_rvalid(r_rvalid[0]), .s_axil_rdata(r_rdata[0]),
    .s_axil_rresp(r_rresp[0]),
    .dma_busy_i(dma_busy), .irq_o(npu_irq)
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

  assign irq_o = npu_irq || dma_irq;
  assign busy_o = dma_busy;

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
    .s_arid(d_arid), .s_araddr(d_araddr), .s_arlen(d_arlen), .s_arsize(d_arsize),
    .s_arburst(d_arburst), .s_arvalid(d_arvalid), .s_arready(d_arready),
    .s_rid(d_rid), .s_rdata(d_rdata), .s_rresp(d_rresp), .s_rlast(d_rlast),
    .s_rvalid(d_rvalid), .s_rready(d_rready),
    .s_awid(d_awid), .s_awaddr(d_awaddr), .s_awlen(d_awlen), .s_awsize(d_awsize),
    .s_awburst(d_awburst), .s_awvalid(d_awvalid), .s_awready(d_awready),
    .s_wdata(d_wdata), .s_wstrb(d_wstrb), .s_wlast(d_wlast), .s_wvalid(d_wvalid),
    .s_wready(d_wready),
    .s_bid(d_bid), .s_bresp(d_bresp), .s_bvalid(d_bvalid), .s_bready(d_bready),
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
