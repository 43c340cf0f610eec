`default_nettype none

`include "npu_axi_typedef.svh"
`include "npu_axi_assign.svh"

/// The compute engine (`npu_cmp_core`) with a flat AXI4 master port, the toplevel of its
/// block test: cocotbext-axi finds the bus by signal-name prefix (`m_axi_*`). Control and
/// status pass through under the engine's own port names.
module npu_cmp_core_flat #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat (= Block)
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned IdWidth = 4,          /// AXI ID bits (>= 1)
  parameter int unsigned MaxBurstBeats = 256,  /// longest burst
  parameter int unsigned MaxOutstanding = 8,   /// bursts in flight per unit
  parameter int unsigned Block = 16,           /// B: the MAC array is B x B
  parameter int unsigned InpRows = 8192,       /// INP rows (power of two)
  parameter int unsigned WgtRows = 1024,       /// WGT rows (power of two)
  parameter int unsigned AccRows = 4096,       /// ACC rows (power of two)
  parameter int unsigned PrmRows = 256,        /// PRM rows (power of two)
  parameter int unsigned LutTables = 4,        /// 256-entry lookup tables (power of two)
  parameter int unsigned QueueDepth = 8,       /// instructions waiting per unit
  parameter int unsigned TokenDepth = 64,      /// tokens per dependency queue
  parameter int unsigned WatchdogCycles = 1048576,  /// cycles without progress = WATCHDOG
  parameter logic [63:0] Mem0Base = 64'h0,     /// memory window 0 base
  parameter logic [63:0] Mem0Size = 64'h0,     /// memory window 0 size (0 = absent)
  parameter logic [63:0] Mem1Base = 64'h0,     /// memory window 1 base
  parameter logic [63:0] Mem1Size = 64'h0,     /// memory window 1 size
  parameter logic [63:0] Mem2Base = 64'h0,     /// memory window 2 base
  parameter logic [63:0] Mem2Size = 64'h0,     /// memory window 2 size
  localparam int unsigned DataWidth = BusBytes * 8
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  // Control (CORE_CTRL and the launch registers).
  input  wire                  start_i,        /// run the program (one cycle; ignored while busy)
  input  wire                  abort_i,        /// stop the program with ABORTED (one cycle)
  input  wire                  wipe_i,         /// zero every buffer (one cycle; ignored while busy)
  input  wire  [63:0]          prog_addr_i,    /// PROG_ADDR: first instruction
  input  wire  [31:0]          prog_insns_i,   /// PROG_INSNS
  input  wire  [15:0][63:0]    base_i,         /// BASE[0..15]
  // Status (CORE_STATUS, CORE_ERR_*).
  output logic                 busy_o,         /// a program runs (or drains after an error), or a wipe
  output logic                 wiping_o,       /// the buffers are being zeroed (after reset, WIPE)
  output logic                 done_o,         /// the last program reached FINISH
  output logic                 error_o,        /// the last program stopped with an error
  output npu_isa_pkg::err_e    err_code_o,     /// its code
  output logic [1:0]           err_unit_o,     /// its unit (npu_cmp_pkg ErrUnit*)
  output logic [31:0]          err_pc_o,       /// its instruction index
  output logic [63:0]          err_addr_o,     /// the memory address involved
  output logic                 done_event_o,   /// a program ended without error (one cycle)
  output logic                 error_event_o,  /// a program ended with an error (one cycle)
  output logic [npu_config_pkg::NumPerf-1:0][63:0] perf_o,  /// counters, indices Perf*
  // AXI4 master.
  output logic [IdWidth-1:0]   m_axi_arid,
  output logic [AddrWidth-1:0] m_axi_araddr,
  output logic [7:0]           m_axi_arlen,
  output logic [2:0]           m_axi_arsize,
  output logic [1:0]           m_axi_arburst,
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
  output logic                 m_axi_bready
);
  typedef logic [AddrWidth-1:0] addr_t;
  typedef logic [IdWidth-1:0]   id_t;
  typedef logic [DataWidth-1:0] data_t;
  typedef logic [BusBytes-1:0]  strb_t;
  `NPU_AXI_TYPEDEF_ALL(axi, addr_t, id_t, data_t, strb_t)

  axi_req_t axi_req;
  axi_rsp_t axi_rsp;
  `NPU_AXI_ASSIGN_TO_FLAT(m_axi, axi_req, axi_rsp)

  npu_cmp_core #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
    .MaxBurstBeats(MaxBurstBeats), .MaxOutstanding(MaxOutstanding), .Block(Block),
    .InpRows(InpRows), .WgtRows(WgtRows), .AccRows(AccRows), .PrmRows(PrmRows),
    .LutTables(LutTables), .QueueDepth(QueueDepth), .TokenDepth(TokenDepth),
    .WatchdogCycles(WatchdogCycles),
    .Mem0Base(Mem0Base), .Mem0Size(Mem0Size), .Mem1Base(Mem1Base), .Mem1Size(Mem1Size),
    .Mem2Base(Mem2Base), .Mem2Size(Mem2Size),
    .aw_chan_t(axi_aw_chan_t), .w_chan_t(axi_w_chan_t), .b_chan_t(axi_b_chan_t),
    .req_t(axi_req_t), .rsp_t(axi_rsp_t)
  ) u_core (
    .clk_i, .rst_ni, .start_i, .abort_i, .wipe_i, .prog_addr_i, .prog_insns_i, .base_i,
    .busy_o, .wiping_o, .done_o, .error_o, .err_code_o, .err_unit_o, .err_pc_o, .err_addr_o,
    .done_event_o, .error_event_o, .perf_o, .m_axi_req_o(axi_req), .m_axi_rsp_i(axi_rsp)
  );
endmodule

`default_nettype wire
