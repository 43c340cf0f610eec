`default_nettype none

`include "npu_axi_typedef.svh"
`include "npu_axi_assign.svh"

/// Simulation top: one target's NPU (`npu_top`) with its external memories, as a board
/// would have them: the PS DDR window (udma) and the PL DDR (plddr), both DPI-C models over
/// shared-memory files (`+npu_mem_udma=PATH`, `+npu_mem_plddr=PATH`).
///
/// `Target` picks the chip from rtl/config/npu.toml (via npu_config_pkg): 1 = Buyi,
/// 2 = ZG330. The harness drives `rst_ni` and the AXI4-Lite port and watches `irq_o`.
/// The fault controller (`npu_fault_ctl`, a register block at FaultBase) injects faults on
/// cue; the fault inputs make a memory answer errors in a window (the RTL tests' older
/// hook); tie them to zero otherwise.
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
  input  wire         tb_strict_i,          /// 1: the toplevel AXI4-Lite port is driven by hand
  input  wire         rbm_kick_i,           /// register bus master: a batch is queued (toggle)
  output logic        rbm_busy_o,           /// register bus master: a batch runs
  input  wire  [63:0] rbm_guard_i,          /// register bus master: cycles a batch may run
  output logic        rbm_wait_o,           /// busy and within the guard: its fall ends a wait
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

  // The memories' AXI4 ports and the register bus, as request/response structs.
  typedef logic [AddrWidth-1:0] addr_t;
  typedef logic [IdWidth-1:0]   id_t;
  typedef logic [DataWidth-1:0] data_t;
  typedef logic [BusBytes-1:0]  strb_t;
  `NPU_AXI_TYPEDEF_ALL(axi, addr_t, id_t, data_t, strb_t)
  typedef logic [31:0] reg_addr_t;
  typedef logic [31:0] reg_data_t;
  typedef logic [3:0]  reg_strb_t;
  `NPU_AXIL_TYPEDEF_ALL(axil, reg_addr_t, reg_data_t, reg_strb_t)

  // ---------------------------------------------------------------- register bus
  // The register bus master (port 0) and the toplevel's AXI4-Lite port (port 1) share the
  // NPU's register port through an arbiter.
  axil_req_t rbm_req, tb_req, axil_req;  // the master's, the toplevel port's, the NPU's
  axil_rsp_t rbm_rsp, tb_rsp, axil_rsp;
  logic      rbm_lock;
  `NPU_AXIL_ASSIGN_FROM_FLAT(s_axil, tb_req, tb_rsp)

  npu_regbus_master #(.req_t(axil_req_t), .rsp_t(axil_rsp_t)) u_regbus (
    .clk_i(clk), .rst_ni, .kick_i(rbm_kick_i), .busy_o(rbm_busy_o), .lock_o(rbm_lock),
    .m_req_o(rbm_req), .m_rsp_i(rbm_rsp)
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

  npu_axil_arb #(.req_t(axil_req_t), .rsp_t(axil_rsp_t)) u_axil_arb (
    .clk_i(clk), .rst_ni, .lock0_i(rbm_lock), .slv_req_i({tb_req, rbm_req}),
    .slv_rsp_o({tb_rsp, rbm_rsp}), .mst_req_o(axil_req), .mst_rsp_i(axil_rsp)
  );

  // The toplevel port's master requests or holds the link. cocotbext-axi (tests), under
  // this clock, drops or changes a request it thinks taken a cycle early: the link's master
  // side is not checked then (npu_axil_checker's tb_i), unless a test that drives the port
  // by hand asks for it (tb_strict_i). The NPU's own register ports are always checked.
  wire tb_on_link = (tb_req.aw_valid || tb_req.w_valid || tb_req.ar_valid || u_axil_arb.sel)
                    && !tb_strict_i;

  npu_axil_checker #(.Name("regbus master"), .req_t(axil_req_t), .rsp_t(axil_rsp_t))
  u_check_regbus (
    .clk_i(clk), .rst_ni, .req_i(rbm_req), .rsp_i(rbm_rsp), .tb_i(1'b0)
  );

  npu_axil_checker #(.Name("npu register port"), .req_t(axil_req_t), .rsp_t(axil_rsp_t))
  u_check_axil (
    .clk_i(clk), .rst_ni, .req_i(axil_req), .rsp_i(axil_rsp), .tb_i(tb_on_link)
  );

  // ---------------------------------------------------------------- faults on cue
  // The fault controller sits on the register bus beside the NPU and has its hands on the
  // interrupt line and the NPU's memory interconnect (rtl/sim/npu_fault_ctl.sv).
  axil_req_t   npu_axil_req;
  axil_rsp_t   npu_axil_rsp;
  logic [1:0]  npu_irqs;
  logic [1:0]  fmem_mode, fmem_resp, fmem_unit;
  logic        fmem_reads, fmem_writes, fmem_release;
  logic [63:0] fmem_base, fmem_size;
  logic [2:0]  fmem_bit;
  logic [1:0]  fmem_event, fmem_fire;  // {AW, AR} on the NPU's memory interconnect
  npu_fault_ctl #(
    .Base(32'(IsZg330 ? Zg330FaultBase : BuyiFaultBase)), .MemLanes(2),
    .axil_req_t(axil_req_t), .axil_rsp_t(axil_rsp_t)
  ) u_faults (
    .clk_i(clk), .rst_ni, .bus_req_i(axil_req), .bus_rsp_o(axil_rsp),
    .npu_req_o(npu_axil_req), .npu_rsp_i(npu_axil_rsp), .irq_src_i(npu_irqs), .irq_o,
    .mem_mode_o(fmem_mode), .mem_resp_o(fmem_resp), .mem_unit_o(fmem_unit),
    .mem_reads_o(fmem_reads), .mem_writes_o(fmem_writes), .mem_base_o(fmem_base),
    .mem_size_o(fmem_size), .mem_bit_o(fmem_bit), .mem_release_o(fmem_release),
    .mem_event_i(fmem_event), .mem_fire_o(fmem_fire)
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
    .clk_i(clk), .rst_ni, `NPU_AXIL_CONNECT_FLAT(s_axil, npu_axil_req, npu_axil_rsp),
    .m_axi_arid(arid), .m_axi_araddr(araddr), .m_axi_arlen(arlen), .m_axi_arsize(arsize),
    .m_axi_arburst(arburst), .m_axi_arvalid(arvalid), .m_axi_arready(arready),
    .m_axi_rid(rid), .m_axi_rdata(rdata), .m_axi_rresp(rresp), .m_axi_rlast(rlast),
    .m_axi_rvalid(rvalid), .m_axi_rready(rready),
    .m_axi_awid(awid), .m_axi_awaddr(awaddr), .m_axi_awlen(awlen), .m_axi_awsize(awsize),
    .m_axi_awburst(awburst), .m_axi_awvalid(awvalid), .m_axi_awready(awready),
    .m_axi_wdata(wdata), .m_axi_wstrb(wstrb), .m_axi_wlast(wlast),
    .m_axi_wvalid(wvalid), .m_axi_wready(wready),
    .m_axi_bid(bid), .m_axi_bresp(bresp), .m_axi_bvalid(bvalid), .m_axi_bready(bready),
    .irq_o(), .irq_src_o(npu_irqs), .busy_o,
    .fault_mode_i(fmem_mode), .fault_resp_i(fmem_resp), .fault_unit_i(fmem_unit),
    .fault_reads_i(fmem_reads), .fault_writes_i(fmem_writes), .fault_base_i(fmem_base),
    .fault_size_i(fmem_size), .fault_bit_i(fmem_bit), .fault_release_i(fmem_release),
    .fault_event_o(fmem_event), .fault_fire_i(fmem_fire)
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
    axi_req_t mem_req;
    axi_rsp_t mem_rsp;
    assign mem_req = '{
      aw: '{id: awid, addr: awaddr, len: awlen, size: awsize, burst: awburst},
      aw_valid: awvalid[m], w: '{data: wdata, strb: wstrb, last: wlast}, w_valid: wvalid[m],
      b_ready: bready[m],
      ar: '{id: arid, addr: araddr, len: arlen, size: arsize, burst: arburst},
      ar_valid: arvalid[m], r_ready: rready[m]
    };
    assign {awready[m], wready[m], bid[m], bresp[m], bvalid[m], arready[m]} =
        {mem_rsp.aw_ready, mem_rsp.w_ready, mem_rsp.b.id, mem_rsp.b.resp, mem_rsp.b_valid,
         mem_rsp.ar_ready};
    assign {rid[m], rdata[m], rresp[m], rlast[m], rvalid[m]} =
        {mem_rsp.r.id, mem_rsp.r.data, mem_rsp.r.resp, mem_rsp.r.last, mem_rsp.r_valid};
    npu_axi_mem #(
      .BusBytes(BusBytes), .AddrWidth(AddrWidth), .IdWidth(IdWidth),
      .Base(MemBase[m]), .Size(MemSize[m]), .UseDpi(1'b1), .Name(MemName[m]),
      .DpiSlot(m),
      .MaxOutstanding(DmaMaxOutstanding), .ReadLatency(NpuDdrLatency),
      .SharedDataBus(NpuDdrSharedBus != 0), .req_t(axi_req_t), .rsp_t(axi_rsp_t)
    ) u_mem (
      .clk_i(clk), .rst_ni,
      .fault_base_i(fault_base_q), .fault_size_i(is_faulty ? fault_size_q : 64'h0),
      .fault_resp_i(fault_resp_q), .s_req_i(mem_req), .s_rsp_o(mem_rsp)
    );
  end
  // Checkpoints (--savable): serialisation of the unpacked structs Verilator leaves out.
  // (npu_sim is Verilator's alone: the simulation top of the harness.)
`systemc_header
#include "npu_savable_structs.h"
`verilog
endmodule

`default_nettype wire
