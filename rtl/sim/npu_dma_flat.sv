`default_nettype none

`include "npu_axi_typedef.svh"
`include "npu_axi_assign.svh"

/// The DMA engine (`npu_dma`) with flat AXI ports, the toplevel of its block test:
/// cocotbext-axi finds a bus by signal-name prefix (`m_axi_*`, `s_axil_*`), and the test
/// builds every bus width, so this top declares the struct types for its parameters.
module npu_dma_flat #(
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
  typedef logic [AddrWidth-1:0] addr_t;
  typedef logic [IdWidth-1:0]   id_t;
  typedef logic [DataWidth-1:0] data_t;
  typedef logic [BusBytes-1:0]  strb_t;
  `NPU_AXI_TYPEDEF_ALL(axi, addr_t, id_t, data_t, strb_t)
  typedef logic [11:0] reg_addr_t;
  typedef logic [31:0] reg_data_t;
  typedef logic [3:0]  reg_strb_t;
  `NPU_AXIL_TYPEDEF_ALL(axil, reg_addr_t, reg_data_t, reg_strb_t)

  axil_req_t axil_req;
  axil_rsp_t axil_rsp;
  axi_req_t  axi_req;
  axi_rsp_t  axi_rsp;
  `NPU_AXIL_ASSIGN_FROM_FLAT(s_axil, axil_req, axil_rsp)
  `NPU_AXI_ASSIGN_TO_FLAT(m_axi, axi_req, axi_rsp)
  // The NPU's buses carry no cache or protection attributes (nothing in it reads them);
  // the DMA's bursts are normal non-cacheable bufferable, unprivileged secure data.
  assign m_axi_arcache = 4'b0011;
  assign m_axi_awcache = 4'b0011;
  assign m_axi_arprot  = 3'b000;
  assign m_axi_awprot  = 3'b000;

  npu_dma #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .MaxBurstBeats(MaxBurstBeats),
    .MaxOutstanding(MaxOutstanding), .FifoDepth(FifoDepth),
    .Mem0Base(Mem0Base), .Mem0Size(Mem0Size), .Mem1Base(Mem1Base), .Mem1Size(Mem1Size),
    .Mem2Base(Mem2Base), .Mem2Size(Mem2Size),
    .HwVersionMajor(HwVersionMajor), .HwVersionMinor(HwVersionMinor),
    .HwVersionPatch(HwVersionPatch),
    .axil_req_t(axil_req_t), .axil_rsp_t(axil_rsp_t), .axi_req_t(axi_req_t), .axi_rsp_t(axi_rsp_t)
  ) u_dma (
    .clk_i, .rst_ni, .s_axil_req_i(axil_req), .s_axil_rsp_o(axil_rsp),
    .m_axi_req_o(axi_req), .m_axi_rsp_i(axi_rsp), .irq_o, .busy_o
  );
endmodule

`default_nettype wire
