`default_nettype none

/// AXI4-Lite 2-to-1 arbiter: one port at a time.
///
/// Port 0 is the simulation's register bus master, port 1 the toplevel's AXI4-Lite port
/// (cocotbext-axi in tests, a C++ loop in benches). When both ask for a free bus, the one
/// that did not have it last goes first (round robin); the other waits with its request
/// held. A port owns the bus from its first address or data handshake until every
/// transaction it started has its response. Port 0 may pipeline reads (`MaxReads` in
/// flight are counted); port 1 gets one read at a time: cocotbext-axi, under npu_sim's
/// clock, samples `ready` and `valid` after the edge, so it must see `arready` fall after
/// its address is taken (as before reads were pipelined) or it misses a one-cycle R. Port 0
/// also keeps the bus while `lock0_i` is high, which makes its
/// read-modify-write (masked write) atomic. The grant is combinational while the bus is
/// free, so an access costs no extra cycle.
module npu_axil_arb #(
  parameter int unsigned MaxReads = 4,  /// reads in flight the slave accepts, at most
  parameter type req_t = logic,  /// AXI4-Lite request (npu_axi_typedef.svh)
  parameter type rsp_t = logic   /// AXI4-Lite response
) (
  input  wire        clk_i,      /// clock
  input  wire        rst_ni,     /// asynchronous reset, active low
  input  wire        lock0_i,    /// port 0 keeps the bus between its transactions
  input  req_t [1:0] slv_req_i,  /// ports 0 and 1
  output rsp_t [1:0] slv_rsp_o,  /// response payloads shared, valids and readies steered
  output req_t       mst_req_o,  /// to the slave
  input  rsp_t       mst_rsp_i
);
  localparam int unsigned CountWidth = $clog2(MaxReads + 1);
  logic [CountWidth-1:0] reads_q;     // reads whose address went through, data not yet
  logic                  writing_q;   // a write has started and its response is not through
  logic                  owner_q;     // the port they belong to (or that last had the bus)
  logic                  owned, sel;

  wire req0 = slv_req_i[0].aw_valid || slv_req_i[0].w_valid || slv_req_i[0].ar_valid;
  wire req1 = slv_req_i[1].aw_valid || slv_req_i[1].w_valid || slv_req_i[1].ar_valid;
  assign owned = reads_q != '0 || writing_q || (!owner_q && lock0_i);
  assign sel   = owned ? owner_q : (req0 && req1) ? !owner_q : !req0;

  // Field by field: a conditional on the whole struct makes Verilator build and take apart a
  // wide temporary at every evaluation.
  assign mst_req_o = '{
    aw: sel ? slv_req_i[1].aw : slv_req_i[0].aw,
    aw_valid: sel ? slv_req_i[1].aw_valid : slv_req_i[0].aw_valid,
    w: sel ? slv_req_i[1].w : slv_req_i[0].w,
    w_valid: sel ? slv_req_i[1].w_valid : slv_req_i[0].w_valid,
    b_ready: sel ? slv_req_i[1].b_ready : slv_req_i[0].b_ready,
    ar: sel ? slv_req_i[1].ar : slv_req_i[0].ar,
    ar_valid: sel ? slv_req_i[1].ar_valid && reads_q == '0 : slv_req_i[0].ar_valid,
    r_ready: sel ? slv_req_i[1].r_ready : slv_req_i[0].r_ready
  };
  for (genvar i = 0; i < 2; i++) begin : g_slv
    wire mine = sel == 1'(i);
    assign slv_rsp_o[i] = '{
      aw_ready: mine && mst_rsp_i.aw_ready, w_ready: mine && mst_rsp_i.w_ready,
      b: mst_rsp_i.b, b_valid: mine && mst_rsp_i.b_valid,
      ar_ready: mine && mst_rsp_i.ar_ready && (i == 0 || reads_q == '0),
      r: mst_rsp_i.r, r_valid: mine && mst_rsp_i.r_valid
    };
  end

  wire ar_fire = mst_req_o.ar_valid && mst_rsp_i.ar_ready;
  wire r_fire  = mst_rsp_i.r_valid && mst_req_o.r_ready;
  wire w_start = (mst_req_o.aw_valid && mst_rsp_i.aw_ready)
              || (mst_req_o.w_valid && mst_rsp_i.w_ready);
  wire b_fire  = mst_rsp_i.b_valid && mst_req_o.b_ready;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      reads_q   <= '0;
      writing_q <= 1'b0;
      owner_q   <= 1'b1;
    end else begin
      if (ar_fire || w_start) owner_q <= sel;
      if (ar_fire && !r_fire) reads_q <= reads_q + CountWidth'(1);
      else if (!ar_fire && r_fire) reads_q <= reads_q - CountWidth'(1);
      if (w_start) writing_q <= 1'b1;
      else if (b_fire) writing_q <= 1'b0;
    end
  end
endmodule

`default_nettype wire
