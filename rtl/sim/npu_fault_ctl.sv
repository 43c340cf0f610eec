`default_nettype none

`include "npu_axi_typedef.svh"
`include "npu_axi_assign.svh"

/// The simulation top's fault controller (rtl/regs/fault.rdl; docs/debugging.md, "Faults
/// on cue"): a register block on the register bus beside the NPU, at `Base`, and the hands
/// it has on the NPU's interrupt line, on its register port (a read that returns a given
/// value) and, through `npu_fault_axi` in npu_top, on the NPU's memory interconnect. Being
/// registers, faults travel every route registers do, are recorded and replayed, and
/// vanish with the rest of the device's state at a lease's end.
///
///   bus (from the arbiter) -> npu_axil_demux -+-> fault_csr          [Base, Base + 4 KiB)
///                                             +-> read override -> the NPU (anything else)
///
/// The demux adds no cycle, and a disarmed controller changes nothing the NPU sees.
module npu_fault_ctl #(
  parameter logic [31:0] Base = 32'hC000_0000,  /// the block's bus address
  parameter int unsigned MemLanes = 2,          /// memory events per cycle: {AW, AR}
  parameter type         axil_req_t = logic,    /// AXI4-Lite, 32-bit addresses
  parameter type         axil_rsp_t = logic
) (
  input  wire                 clk_i,         /// clock
  input  wire                 rst_ni,        /// asynchronous reset, active low
  input  axil_req_t           bus_req_i,     /// the register bus (the arbiter's output)
  output axil_rsp_t           bus_rsp_o,
  output axil_req_t           npu_req_o,     /// the NPU's register port
  input  axil_rsp_t           npu_rsp_i,
  input  wire  [1:0]          irq_src_i,     /// the NPU's interrupts {NPU block, DMA} ...
  output logic                irq_o,         /// ... as the host sees them: one line
  output logic [1:0]          mem_mode_o,    /// memory faults (npu_fault_axi)
  output logic [1:0]          mem_resp_o,
  output logic [1:0]          mem_unit_o,
  output logic                mem_reads_o,
  output logic                mem_writes_o,
  output logic [63:0]         mem_base_o,
  output logic [63:0]         mem_size_o,
  output logic [2:0]          mem_bit_o,
  output logic                mem_release_o, /// a register write on the NPU's port
  input  wire  [MemLanes-1:0] mem_event_i,
  output logic [MemLanes-1:0] mem_fire_o
);
  import fault_csr_pkg::*;

  localparam int unsigned ReadsInFlight = 4;

  // ---------------------------------------------------------------- the register bus
  axil_req_t [1:0] sub_req;
  axil_rsp_t [1:0] sub_rsp;
  npu_axil_demux #(
    .Base0(Base), .Base1(32'h0), .BlockSize(32'h1000), .ReadsInFlight(ReadsInFlight),
    .Port1TakesRest(1'b1), .slv_req_t(axil_req_t), .slv_rsp_t(axil_rsp_t),
    .mst_req_t(axil_req_t), .mst_rsp_t(axil_rsp_t)
  ) u_demux (
    .clk_i, .rst_ni, .slv_req_i(bus_req_i), .slv_rsp_o(bus_rsp_o),
    .mst_req_o(sub_req), .mst_rsp_i(sub_rsp)
  );

  fault_csr__in_t  hwif_in;
  fault_csr__out_t hwif_out;
  fault_csr u_csr (
    .clk(clk_i), .arst_n(rst_ni),
    .s_axil_awready(sub_rsp[0].aw_ready), .s_axil_awvalid(sub_req[0].aw_valid),
    .s_axil_awaddr(sub_req[0].aw.addr[11:0]), .s_axil_awprot(sub_req[0].aw.prot),
    .s_axil_wready(sub_rsp[0].w_ready), .s_axil_wvalid(sub_req[0].w_valid),
    .s_axil_wdata(sub_req[0].w.data), .s_axil_wstrb(sub_req[0].w.strb),
    .s_axil_bready(sub_req[0].b_ready), .s_axil_bvalid(sub_rsp[0].b_valid),
    .s_axil_bresp(sub_rsp[0].b.resp),
    .s_axil_arready(sub_rsp[0].ar_ready), .s_axil_arvalid(sub_req[0].ar_valid),
    .s_axil_araddr(sub_req[0].ar.addr[11:0]), .s_axil_arprot(sub_req[0].ar.prot),
    .s_axil_rready(sub_req[0].r_ready), .s_axil_rvalid(sub_rsp[0].r_valid),
    .s_axil_rdata(sub_rsp[0].r.data), .s_axil_rresp(sub_rsp[0].r.resp),
    .hwif_in, .hwif_out
  );

  // ---------------------------------------------------------------- memory faults
  logic [31:0] mem_hits;
  assign mem_mode_o   = hwif_out.MEM_MODE.MODE.value;
  assign mem_resp_o   = hwif_out.MEM_MODE.RESP.value;
  assign mem_unit_o   = hwif_out.MEM_MODE.UNIT.value;
  assign mem_reads_o  = hwif_out.MEM_MODE.READS.value;
  assign mem_writes_o = hwif_out.MEM_MODE.WRITES.value;
  assign mem_bit_o    = hwif_out.MEM_MODE.BIT.value;
  assign mem_base_o   = {hwif_out.MEM_BASE_HI.VALUE.value, hwif_out.MEM_BASE_LO.VALUE.value};
  assign mem_size_o   = {hwif_out.MEM_SIZE_HI.VALUE.value, hwif_out.MEM_SIZE_LO.VALUE.value};
  npu_fault_trigger #(.Lanes(MemLanes)) u_mem_trigger (
    .clk_i, .rst_ni, .arm_i(hwif_out.MEM_MODE.MODE.swmod), .on_i(mem_mode_o != 2'd0),
    .delay_i(hwif_out.MEM_ARM_DELAY.VALUE.value), .skip_i(hwif_out.MEM_SKIP.VALUE.value),
    .count_i(hwif_out.MEM_COUNT.VALUE.value), .event_i(mem_event_i), .fire_o(mem_fire_o),
    .ready_o(), .hits_o(mem_hits)
  );
  // A stalled burst goes on at the next register write to the NPU (the driver's abort).
  assign mem_release_o = sub_req[1].aw_valid && sub_rsp[1].aw_ready;

  // ---------------------------------------------------------------- register reads
  // A FIFO of verdicts from each read's address to its data (the NPU answers in order).
  logic [31:0] reg_hits;
  logic        reg_ar_take, reg_r_take, reg_head, reg_head_valid, reg_fire;
  assign reg_ar_take = sub_req[1].ar_valid && npu_rsp_i.ar_ready;
  assign reg_r_take  = npu_rsp_i.r_valid && sub_req[1].r_ready;
  npu_fault_trigger #(.Lanes(1)) u_reg_trigger (
    .clk_i, .rst_ni, .arm_i(hwif_out.REG_MODE.MODE.swmod), .on_i(hwif_out.REG_MODE.MODE.value),
    .delay_i(hwif_out.REG_ARM_DELAY.VALUE.value), .skip_i(hwif_out.REG_SKIP.VALUE.value),
    .count_i(hwif_out.REG_COUNT.VALUE.value),
    .event_i(reg_ar_take && sub_req[1].ar.addr == hwif_out.REG_ADDR.VALUE.value),
    .fire_o(reg_fire), .ready_o(), .hits_o(reg_hits)
  );
  npu_fifo #(.Width(1), .Depth(ReadsInFlight)) u_reg_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(reg_fire), .in_valid_i(reg_ar_take), .in_ready_o(),
    .out_data_o(reg_head), .out_valid_o(reg_head_valid), .out_ready_i(reg_r_take), .count_o()
  );
  always_comb begin
    npu_req_o = sub_req[1];
    sub_rsp[1] = npu_rsp_i;
    if (reg_head_valid && reg_head) sub_rsp[1].r.data = hwif_out.REG_VALUE.VALUE.value;
  end

  // ---------------------------------------------------------------- the interrupt line
  // Events: the rising edges of the chosen source's interrupt (drop, delay); for a
  // spurious interrupt, the moment the fault is ready (once per arming). The other source
  // goes by untouched.
  logic [1:0]  irq_mode, irq_pick;
  logic [31:0] irq_hits, irq_left_q;
  logic        irq_i, irq_other, irq_q, irq_fire, irq_ready, irq_event;
  logic        irq_line, dropping_q, spurious_done_q;
  assign irq_mode  = hwif_out.IRQ_MODE.MODE.value;
  assign irq_pick  = hwif_out.IRQ_MODE.SOURCE.value == 2'd1 ? 2'b01
                   : hwif_out.IRQ_MODE.SOURCE.value == 2'd2 ? 2'b10 : 2'b11;
  assign irq_i     = |(irq_src_i & irq_pick);
  assign irq_other = |(irq_src_i & ~irq_pick);
  assign irq_event = irq_mode == 2'd3 ? irq_ready && !spurious_done_q : irq_i && !irq_q;
  npu_fault_trigger #(.Lanes(1)) u_irq_trigger (
    .clk_i, .rst_ni, .arm_i(hwif_out.IRQ_MODE.MODE.swmod), .on_i(irq_mode != 2'd0),
    .delay_i(hwif_out.IRQ_ARM_DELAY.VALUE.value), .skip_i(hwif_out.IRQ_SKIP.VALUE.value),
    .count_i(hwif_out.IRQ_COUNT.VALUE.value), .event_i(irq_event), .fire_o(irq_fire),
    .ready_o(irq_ready), .hits_o(irq_hits)
  );
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      irq_q           <= 1'b0;
      dropping_q      <= 1'b0;
      spurious_done_q <= 1'b0;
      irq_left_q      <= '0;
    end else begin
      irq_q <= irq_i;
      if (hwif_out.IRQ_MODE.MODE.swmod) begin
        dropping_q      <= 1'b0;
        spurious_done_q <= 1'b0;
        irq_left_q      <= '0;
      end else begin
        dropping_q <= irq_mode == 2'd1 && irq_i && (dropping_q || irq_fire);
        if (irq_fire && irq_mode == 2'd3) spurious_done_q <= 1'b1;
        if (irq_fire && irq_mode[1]) irq_left_q <= hwif_out.IRQ_CYCLES.VALUE.value;
        else if (irq_left_q != '0) irq_left_q <= irq_left_q - 32'd1;
      end
    end
  end
  always_comb begin
    unique case (irq_mode)
      2'd1: irq_line = irq_i && !(dropping_q || irq_fire);
      2'd2: irq_line = irq_i && !(irq_fire || irq_left_q != '0);
      2'd3: irq_line = irq_i || irq_fire || irq_left_q != '0;
      default: irq_line = irq_i;
    endcase
  end
  assign irq_o = irq_line || irq_other;

  always_comb begin
    hwif_in.MEM_HITS.VALUE.next = mem_hits;
    hwif_in.IRQ_HITS.VALUE.next = irq_hits;
    hwif_in.REG_HITS.VALUE.next = reg_hits;
  end
endmodule

`default_nettype wire
