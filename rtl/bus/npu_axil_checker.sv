`default_nettype none

/// AXI4-Lite protocol checker for one link (simulation only; it drives nothing).
///
/// Checks, each clock edge after reset:
/// - handshake stability: while `valid && !ready` on any channel, `valid` stays high and
///   the payload (address, prot, data, strobes, response) does not change;
/// - a write alone on the link: no address or data handshake while a write waits for its
///   response, no write while reads wait for theirs, no write channel accepted twice;
///   reads may follow reads (up to `MaxReads` waiting: the NPU's register port pipelines
///   them);
/// - responses: none without a request, and never EXOKAY (illegal in AXI4-Lite).
///
/// Each violation prints a warning naming the rule and `Name`, and counts in
/// `violations_o` (saturating), which the tests read; a violation never stops the
/// simulation of the device server.
module npu_axil_checker #(
  parameter string Name = "axil",  /// printed with each violation
  parameter int unsigned MaxReads = 4,  /// reads waiting for their data, at most
  parameter type   req_t = logic,  /// AXI4-Lite request, 32-bit address (npu_axi_typedef.svh)
  parameter type   rsp_t = logic   /// AXI4-Lite response
) (
  input  wire         clk_i,        /// clock
  input  wire         rst_ni,       /// asynchronous reset, active low
  input  req_t        req_i,        /// the link
  input  rsp_t        rsp_i,
  output logic [15:0] violations_o  /// rules broken so far (saturates)
);
  // The link's signals by name: test_regbus.py's bus monitor reads them here (cocotb.vlt).
  wire        awvalid = req_i.aw_valid, awready = rsp_i.aw_ready;
  wire [31:0] awaddr  = req_i.aw.addr;
  wire [2:0]  awprot  = req_i.aw.prot;
  wire        wvalid  = req_i.w_valid, wready = rsp_i.w_ready;
  wire [31:0] wdata   = req_i.w.data;
  wire [3:0]  wstrb   = req_i.w.strb;
  wire        bvalid  = rsp_i.b_valid, bready = req_i.b_ready;
  wire [1:0]  bresp   = rsp_i.b.resp;
  wire        arvalid = req_i.ar_valid, arready = rsp_i.ar_ready;
  wire [31:0] araddr  = req_i.ar.addr;
  wire [2:0]  arprot  = req_i.ar.prot;
  wire        rvalid  = rsp_i.r_valid, rready = req_i.r_ready;
  wire [31:0] rdata   = rsp_i.r.data;
  wire [1:0]  rresp   = rsp_i.r.resp;

  localparam logic [1:0] RespExokay = 2'b01;

  // The previous cycle's view of each channel.
  logic        aw_wait_q, w_wait_q, b_wait_q, ar_wait_q, r_wait_q;
  logic [34:0] aw_q, ar_q;
  logic [35:0] w_q;
  logic [1:0]  b_q;
  logic [33:0] r_q;
  // Transaction state: a read or a write address / data has been accepted.
  localparam int unsigned CountWidth = $clog2(MaxReads + 1);
  logic [CountWidth-1:0] rd_open_q;  // reads waiting for their data
  logic        aw_open_q, w_open_q;

  // Rules broken at an edge, one bit each.
  typedef enum int unsigned {
    RuleAwStable, RuleWStable, RuleBStable, RuleArStable, RuleRStable,
    RuleWriteAlone, RuleRespWithoutRequest, RuleExokay, RuleCount
  } rule_e;

  // Everything is evaluated inside the clocked block, at the edge, and only on an active
  // link (a valid, or a handshake waiting or a transaction open): nothing to check on an
  // idle one. The rules sit on the toplevel's inputs; as combinational logic they would be
  // in the input-settling region that a verilated model re-evaluates at every eval() call
  // (two per cycle), and Verilator's dataflow optimizer would compute them whether the
  // link is active or not.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      aw_wait_q    <= 1'b0;
      w_wait_q     <= 1'b0;
      b_wait_q     <= 1'b0;
      ar_wait_q    <= 1'b0;
      r_wait_q     <= 1'b0;
      aw_q         <= '0;
      w_q          <= '0;
      b_q          <= '0;
      ar_q         <= '0;
      r_q          <= '0;
      rd_open_q    <= '0;
      aw_open_q    <= 1'b0;
      w_open_q     <= 1'b0;
      violations_o <= '0;
    end else if (awvalid || wvalid || bvalid || arvalid || rvalid || aw_wait_q || w_wait_q
                 || b_wait_q || ar_wait_q || r_wait_q || rd_open_q != '0 || aw_open_q || w_open_q)
    begin : check  // otherwise every register keeps its value
      logic aw_fire, w_fire, b_fire, ar_fire, r_fire;
      logic [RuleCount-1:0] broken;
      aw_fire = awvalid && awready;
      w_fire  = wvalid && wready;
      b_fire  = bvalid && bready;
      ar_fire = arvalid && arready;
      r_fire  = rvalid && rready;
      broken[RuleAwStable] = aw_wait_q && !(awvalid && {awaddr, awprot} == aw_q);
      broken[RuleWStable]  = w_wait_q && !(wvalid && {wdata, wstrb} == w_q);
      broken[RuleBStable]  = b_wait_q && !(bvalid && bresp == b_q);
      broken[RuleArStable] = ar_wait_q && !(arvalid && {araddr, arprot} == ar_q);
      broken[RuleRStable]  = r_wait_q && !(rvalid && {rdata, rresp} == r_q);
      broken[RuleWriteAlone] =
          (ar_fire && (rd_open_q == CountWidth'(MaxReads) || aw_open_q || w_open_q
                       || aw_fire || w_fire))
        || (aw_fire && (rd_open_q != '0 || aw_open_q)) || (w_fire && (rd_open_q != '0 || w_open_q));
      broken[RuleRespWithoutRequest] =
          (rvalid && rd_open_q == '0) || (bvalid && !(aw_open_q && w_open_q));
      broken[RuleExokay] = (rvalid && rresp == RespExokay) || (bvalid && bresp == RespExokay);

      aw_wait_q <= awvalid && !awready;
      w_wait_q  <= wvalid && !wready;
      b_wait_q  <= bvalid && !bready;
      ar_wait_q <= arvalid && !arready;
      r_wait_q  <= rvalid && !rready;
      aw_q      <= {awaddr, awprot};
      w_q       <= {wdata, wstrb};
      b_q       <= bresp;
      ar_q      <= {araddr, arprot};
      r_q       <= {rdata, rresp};
      if (ar_fire && !r_fire) rd_open_q <= rd_open_q + CountWidth'(1);
      else if (!ar_fire && r_fire) rd_open_q <= rd_open_q - CountWidth'(1);
      if (aw_fire) aw_open_q <= 1'b1;
      else if (b_fire) aw_open_q <= 1'b0;
      if (w_fire) w_open_q <= 1'b1;
      else if (b_fire) w_open_q <= 1'b0;
      if (broken != '0) begin
        $warning("npu_axil_checker(%s): AXI4-Lite rule broken (bits %b: EXOKAY, response without request, a write not alone or too many reads, R/AR/B/W/AW unstable)",
                 Name, broken);
        if (violations_o != '1) violations_o <= violations_o + 16'd1;
      end
    end
  end
endmodule

`default_nettype wire
