`default_nettype none

/// Simulation top: one target's NPU (`npu_top`) with its external memories, as a board
/// would have them: the PS DDR window (udma) and the PL DDR (plddr), both DPI-C models over
/// shared-memory files (`+npu_mem_udma=PATH`, `+npu_mem_plddr=PATH`).
///
/// `Target` picks the chip from rtl/config/npu.toml (via npu_config_pkg): 1 = Buyi,
/// 2 = ZG330. The harness drives `rst_ni` and the AXI4-Lite port and watches `irq_o`.
/// The fault inputs make a memory answer errors in a window (tests of driver error
/// paths); tie them to zero otherwise.
///
/// The clock: the main loop of the executable toggles `clk_i`, never cocotb. In the
/// harness that loop is rtl/sim/npu_sim_main.cpp (a period of `ClockPeriodPs`, edges at
/// multiples of half of it), so waiting a million cycles costs no callback per edge; the
/// raw C++ loops of bench/ toggle it themselves. `clk_o` is the same clock, for cocotb's
/// edge triggers and the waveform windows.
module npu_sim
  import npu_config_pkg::*;
#(
  parameter int unsigned Target = 1 /// 1 = Buyi, 2 = ZG330
) (
  input  wire         clk_i,                /// clock, driven by the executable's main loop
  output logic        clk_o,                /// the clock the NPU runs on
  input  wire         rst_ni,               /// asynchronous reset, active low
  output logic        s_axil_awready,
  input  wire         s_axil_awvalid,
  input  wire  [31:0] s_axil_awaddr,
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
  input  wire  [31:0] s_axil_araddr,
  input  wire  [2:0]  s_axil_arprot,
  input  wire         s_axil_rready,
  output logic        s_axil_rvalid,
  output logic [31:0] s_axil_rdata,
  output logic [1:0]  s_axil_rresp,
  input  wire         host_wake_i,          /// toggled by the main loop: a request for Python
  input  wire         rbm_kick_i,           /// register bus master: a batch is queued (toggle)
  output logic        rbm_busy_o,           /// register bus master: a batch runs
  input  wire  [63:0] rbm_guard_i,          /// register bus master: cycles a batch may run
  output logic        rbm_wait_o,           /// busy and within the guard: its fall ends a wait
  output logic [15:0] rbm_violations_o,     /// AXI4-Lite rules the register bus master broke
  output logic [15:0] axil_violations_o,    /// AXI4-Lite rules broken on the NPU's register port
  output logic        irq_o,                /// the NPU's interrupt line
  output logic        busy_o,               /// an engine is running: time must advance
  input  wire  [1:0]  fault_mem_i,          /// 0: none, 1: udma, 2: plddr
  input  wire  [63:0] fault_base_i,         /// first faulty byte offset in that memory
  input  wire  [63:0] fault_size_i,         /// faulty bytes
  input  wire  [1:0]  fault_resp_i          /// 2'b10 SLVERR or 2'b11 DECERR
);
  localparam bit IsZg330 = Target == 2;
  localparam int unsigned BusBytes = DmaDataWidth / 8;
  localparam int unsigned DataWidth = DmaDataWidth;
  localparam int unsigned AddrWidth = DmaAddrWidth;
  localparam int unsigned IdWidth = 4;
  localparam logic [63:0] UdmaBase = IsZg330 ? Zg330UdmaBase : BuyiUdmaBase;
  localparam logic [63:0] UdmaSize = IsZg330 ? Zg330UdmaSize : BuyiUdmaSize;
  localparam logic [63:0] PlddrBase = IsZg330 ? Zg330PlddrBase : BuyiPlddrBase;
  localparam logic [63:0] PlddrSize = IsZg330 ? Zg330PlddrSize : BuyiPlddrSize;

  initial begin
    if (Target != 1 && Target != 2) $fatal(1, "npu_sim: Target must be 1 (Buyi) or 2 (ZG330)");
  end

  // The main loop (rtl/sim/npu_ring_service.h) toggles host_wake_i when a request waits on
  // the worker's socket; the worker's Python waits for its edge. No logic reads it.
  logic unused_host_wake;
  assign unused_host_wake = host_wake_i;

  logic clk;
  assign clk = clk_i;
  assign clk_o = clk;

  logic [IdWidth-1:0]          arid, awid;
  logic [AddrWidth-1:0]        araddr, awaddr;
  logic [7:0]                  arlen, awlen;
  logic [2:0]                  arsize, awsize;
  logic [1:0]                  arburst, awburst;
  logic [1:0]                  arvalid, arready, rlast, rvalid, rready;
  logic [1:0]                  awvalid, awready, wvalid, wready, bvalid, bready;
  logic [1:0][IdWidth-1:0]     rid, bid;
  logic [1:0][DataWidth-1:0]   rdata;
  logic [1:0][1:0]             rresp, bresp;
  logic [DataWidth-1:0]        wdata;
  logic [BusBytes-1:0]         wstrb;
  logic                        wlast;

  // ---------------------------------------------------------------- register bus
  // The register bus master (port 0) and the toplevel's AXI4-Lite port (port 1) share the
  // NPU's register port through an arbiter.
  logic        rbm_awvalid, rbm_awready, rbm_wvalid, rbm_wready, rbm_bvalid, rbm_bready;
  logic        rbm_arvalid, rbm_arready, rbm_rvalid, rbm_rready, rbm_lock;
  logic [31:0] rbm_awaddr, rbm_wdata, rbm_araddr, rbm_rdata;
  logic [2:0]  rbm_awprot, rbm_arprot;
  logic [3:0]  rbm_wstrb;
  logic [1:0]  rbm_bresp, rbm_rresp;
  logic        axil_awvalid, axil_awready, axil_wvalid, axil_wready, axil_bvalid, axil_bready;
  logic        axil_arvalid, axil_arready, axil_rvalid, axil_rready;
  logic [31:0] axil_awaddr, axil_wdata, axil_araddr, axil_rdata;
  logic [2:0]  axil_awprot, axil_arprot;
  logic [3:0]  axil_wstrb;
  logic [1:0]  axil_bresp, axil_rresp;

  npu_regbus_master u_regbus (
    .clk_i(clk), .rst_ni, .kick_i(rbm_kick_i), .busy_o(rbm_busy_o), .lock_o(rbm_lock),
    .m_awvalid(rbm_awvalid), .m_awready(rbm_awready), .m_awaddr(rbm_awaddr),
    .m_awprot(rbm_awprot), .m_wvalid(rbm_wvalid), .m_wready(rbm_wready),
    .m_wdata(rbm_wdata), .m_wstrb(rbm_wstrb), .m_bvalid(rbm_bvalid), .m_bready(rbm_bready),
    .m_bresp(rbm_bresp), .m_arvalid(rbm_arvalid), .m_arready(rbm_arready),
    .m_araddr(rbm_araddr), .m_arprot(rbm_arprot), .m_rvalid(rbm_rvalid),
    .m_rready(rbm_rready), .m_rdata(rbm_rdata), .m_rresp(rbm_rresp)
  );

  // The harness waits for a batch with one trigger, the fall of `rbm_wait_o`: the batch
  // ended, or it ran `rbm_guard_i` cycles (a master that hangs; the harness tells the two
  // apart by `rbm_busy_o`). One trigger, not a race of two (`First` costs Python tasks).
  // The guard is sampled: the harness writes it before the kick, which the master also
  // samples at the next edge (and see the fault window below: no input feeds logic).
  logic [63:0] rbm_busy_cycles_q, rbm_guard_q;
  always_ff @(posedge clk or negedge rst_ni) begin
    if (!rst_ni) begin
      rbm_busy_cycles_q <= '0;
      rbm_guard_q       <= '0;
    end else begin
      rbm_busy_cycles_q <= rbm_busy_o ? rbm_busy_cycles_q + 64'd1 : '0;
      rbm_guard_q       <= rbm_guard_i;
    end
  end
  assign rbm_wait_o = rbm_busy_o && rbm_busy_cycles_q < rbm_guard_q;

  npu_axil_arb u_axil_arb (
    .clk_i(clk), .rst_ni, .lock0_i(rbm_lock),
    .s0_awvalid(rbm_awvalid), .s0_awready(rbm_awready), .s0_awaddr(rbm_awaddr),
    .s0_awprot(rbm_awprot), .s0_wvalid(rbm_wvalid), .s0_wready(rbm_wready),
    .s0_wdata(rbm_wdata), .s0_wstrb(rbm_wstrb), .s0_bvalid(rbm_bvalid),
    .s0_bready(rbm_bready), .s0_bresp(rbm_bresp), .s0_arvalid(rbm_arvalid),
    .s0_arready(rbm_arready), .s0_araddr(rbm_araddr), .s0_arprot(rbm_arprot),
    .s0_rvalid(rbm_rvalid), .s0_rready(rbm_rready), .s0_rdata(rbm_rdata),
    .s0_rresp(rbm_rresp),
    .s1_awvalid(s_axil_awvalid), .s1_awready(s_axil_awready), .s1_awaddr(s_axil_awaddr),
    .s1_awprot(s_axil_awprot), .s1_wvalid(s_axil_wvalid), .s1_wready(s_axil_wready),
    .s1_wdata(s_axil_wdata), .s1_wstrb(s_axil_wstrb), .s1_bvalid(s_axil_bvalid),
    .s1_bready(s_axil_bready), .s1_bresp(s_axil_bresp), .s1_arvalid(s_axil_arvalid),
    .s1_arready(s_axil_arready), .s1_araddr(s_axil_araddr), .s1_arprot(s_axil_arprot),
    .s1_rvalid(s_axil_rvalid), .s1_rready(s_axil_rready), .s1_rdata(s_axil_rdata),
    .s1_rresp(s_axil_rresp),
    .m_awvalid(axil_awvalid), .m_awready(axil_awready), .m_awaddr(axil_awaddr),
    .m_awprot(axil_awprot), .m_wvalid(axil_wvalid), .m_wready(axil_wready),
    .m_wdata(axil_wdata), .m_wstrb(axil_wstrb), .m_bvalid(axil_bvalid),
    .m_bready(axil_bready), .m_bresp(axil_bresp), .m_arvalid(axil_arvalid),
    .m_arready(axil_arready), .m_araddr(axil_araddr), .m_arprot(axil_arprot),
    .m_rvalid(axil_rvalid), .m_rready(axil_rready), .m_rdata(axil_rdata),
    .m_rresp(axil_rresp)
  );

  npu_axil_checker #(.Name("regbus master")) u_check_regbus (
    .clk_i(clk), .rst_ni,
    .awvalid(rbm_awvalid), .awready(rbm_awready), .awaddr(rbm_awaddr), .awprot(rbm_awprot),
    .wvalid(rbm_wvalid), .wready(rbm_wready), .wdata(rbm_wdata), .wstrb(rbm_wstrb),
    .bvalid(rbm_bvalid), .bready(rbm_bready), .bresp(rbm_bresp),
    .arvalid(rbm_arvalid), .arready(rbm_arready), .araddr(rbm_araddr), .arprot(rbm_arprot),
    .rvalid(rbm_rvalid), .rready(rbm_rready), .rdata(rbm_rdata), .rresp(rbm_rresp),
    .violations_o(rbm_violations_o)
  );

  npu_axil_checker #(.Name("npu register port")) u_check_axil (
    .clk_i(clk), .rst_ni,
    .awvalid(axil_awvalid), .awready(axil_awready), .awaddr(axil_awaddr),
    .awprot(axil_awprot), .wvalid(axil_wvalid), .wready(axil_wready), .wdata(axil_wdata),
    .wstrb(axil_wstrb), .bvalid(axil_bvalid), .bready(axil_bready), .bresp(axil_bresp),
    .arvalid(axil_arvalid), .arready(axil_arready), .araddr(axil_araddr),
    .arprot(axil_arprot), .rvalid(axil_rvalid), .rready(axil_rready), .rdata(axil_rdata),
    .rresp(axil_rresp), .violations_o(axil_violations_o)
  );

  // ---------------------------------------------------------------- the NPU
  npu_top #(
    .TargetId(IsZg330 ? Zg330TargetId : BuyiTargetId),
    .NpuBase(32'(IsZg330 ? Zg330NpuBase : BuyiNpuBase)),
    .DmaBase(32'(IsZg330 ? Zg330DmaBase : BuyiDmaBase)),
    .UdmaBase(UdmaBase), .UdmaSize(UdmaSize), .PlddrBase(PlddrBase), .PlddrSize(PlddrSize),
    .HasOcm(IsZg330 ? Zg330HasOcm : BuyiHasOcm),
    .OcmBase(IsZg330 ? Zg330OcmBase : BuyiOcmBase),
    .OcmSize(IsZg330 ? Zg330OcmSize : BuyiOcmSize),
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth)
  ) u_npu (
    .clk_i(clk), .rst_ni,
    .s_axil_awready(axil_awready), .s_axil_awvalid(axil_awvalid),
    .s_axil_awaddr(axil_awaddr), .s_axil_awprot(axil_awprot),
    .s_axil_wready(axil_wready), .s_axil_wvalid(axil_wvalid), .s_axil_wdata(axil_wdata),
    .s_axil_wstrb(axil_wstrb), .s_axil_bready(axil_bready), .s_axil_bvalid(axil_bvalid),
    .s_axil_bresp(axil_bresp), .s_axil_arready(axil_arready),
    .s_axil_arvalid(axil_arvalid), .s_axil_araddr(axil_araddr),
    .s_axil_arprot(axil_arprot), .s_axil_rready(axil_rready), .s_axil_rvalid(axil_rvalid),
    .s_axil_rdata(axil_rdata), .s_axil_rresp(axil_rresp),
    .m_axi_arid(arid), .m_axi_araddr(araddr), .m_axi_arlen(arlen), .m_axi_arsize(arsize),
    .m_axi_arburst(arburst), .m_axi_arvalid(arvalid), .m_axi_arready(arready),
    .m_axi_rid(rid), .m_axi_rdata(rdata), .m_axi_rresp(rresp), .m_axi_rlast(rlast),
    .m_axi_rvalid(rvalid), .m_axi_rready(rready),
    .m_axi_awid(awid), .m_axi_awaddr(awaddr), .m_axi_awlen(awlen), .m_axi_awsize(awsize),
    .m_axi_awburst(awburst), .m_axi_awvalid(awvalid), .m_axi_awready(awready),
    .m_axi_wdata(wdata), .m_axi_wstrb(wstrb), .m_axi_wlast(wlast),
    .m_axi_wvalid(wvalid), .m_axi_wready(wready),
    .m_axi_bid(bid), .m_axi_bresp(bresp), .m_axi_bvalid(bvalid), .m_axi_bready(bready),
    .irq_o, .busy_o
  );

  // [0] udma (PS DDR window), [1] plddr.
  localparam logic [1:0][63:0] MemBase = {PlddrBase, UdmaBase};
  localparam logic [1:0][63:0] MemSize = {PlddrSize, UdmaSize};
  localparam string MemName [2] = '{"udma", "plddr"};

  // The fault window, sampled: it is set between requests, while simulated time stands
  // still. Verilator evaluates all logic that reads a toplevel input combinationally at
  // every eval (two per cycle); read directly, these inputs put the memories' response
  // path, and from there much of the fabric and the engines, in that set.
  logic [1:0]  fault_mem_q, fault_resp_q;
  logic [63:0] fault_base_q, fault_size_q;
  always_ff @(posedge clk or negedge rst_ni) begin
    if (!rst_ni) begin
      fault_mem_q  <= '0;
      fault_resp_q <= '0;
      fault_base_q <= '0;
      fault_size_q <= '0;
    end else begin
      fault_mem_q  <= fault_mem_i;
      fault_resp_q <= fault_resp_i;
      fault_base_q <= fault_base_i;
      fault_size_q <= fault_size_i;
    end
  end

  for (genvar m = 0; m < 2; m++) begin : g_mem
    wire is_faulty = fault_mem_q == 2'(m + 1);
    npu_axi_mem #(
      .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
      .Base(MemBase[m]), .Size(MemSize[m]), .UseDpi(1'b1), .Name(MemName[m]),
      .MaxOutstanding(DmaMaxOutstanding), .ReadLatency(NpuDdrLatency),
      .SharedDataBus(NpuDdrSharedBus != 0)
    ) u_mem (
      .clk_i(clk), .rst_ni,
      .fault_base_i(fault_base_q), .fault_size_i(is_faulty ? fault_size_q : 64'h0),
      .fault_resp_i(fault_resp_q),
      .s_axi_arid(arid), .s_axi_araddr(araddr), .s_axi_arlen(arlen), .s_axi_arsize(arsize),
      .s_axi_arburst(arburst), .s_axi_arvalid(arvalid[m]), .s_axi_arready(arready[m]),
      .s_axi_rid(rid[m]), .s_axi_rdata(rdata[m]), .s_axi_rresp(rresp[m]),
      .s_axi_rlast(rlast[m]), .s_axi_rvalid(rvalid[m]), .s_axi_rready(rready[m]),
      .s_axi_awid(awid), .s_axi_awaddr(awaddr), .s_axi_awlen(awlen), .s_axi_awsize(awsize),
      .s_axi_awburst(awburst), .s_axi_awvalid(awvalid[m]), .s_axi_awready(awready[m]),
      .s_axi_wdata(wdata), .s_axi_wstrb(wstrb), .s_axi_wlast(wlast),
      .s_axi_wvalid(wvalid[m]), .s_axi_wready(wready[m]),
      .s_axi_bid(bid[m]), .s_axi_bresp(bresp[m]), .s_axi_bvalid(bvalid[m]),
      .s_axi_bready(bready[m])
    );
  end
endmodule

`default_nettype wire
