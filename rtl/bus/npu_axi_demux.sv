`default_nettype none

/// AXI4 1-to-N demultiplexer by address window, with a DECERR default slave.
///
/// Bursts to different slaves may be in flight together; responses come back in request
/// order on each side (a route queue per side names the slave of every burst in flight,
/// and R and B are taken from the head's slave only), so no ID remapping is needed and a
/// master that alternates between memories (OCM and DDR) does not wait for one memory's
/// bursts to finish before the other's latency starts. W beats follow the AW order through
/// a third route queue, so W may run ahead of its AW handshake without going astray.
/// Request payloads are broadcast to every slave; only the valid signals are steered.
///
/// Written for Verilator, as the other bus blocks: a struct is picked from an array by a
/// case statement or conditionals with constant indices, never by an indexed select, and
/// clocked processes read wires, never the struct ports. Verilator then takes the request
/// and response structs apart bit by bit: it sees that no request bit depends on a
/// response bit combinationally (an indexed select hides that, and it reports the pair as
/// a combinational loop, UNOPTFLAT), and it computes each field where it is used instead
/// of packing and unpacking whole structs every cycle (a struct that a clocked process
/// reads is kept whole).
module npu_axi_demux #(
  parameter int unsigned NumSlaves = 2,              /// decoded slaves (1..4)
  parameter int unsigned MaxOutstanding = 8,         /// bursts in flight per side
  /// Slave i decodes [SlaveBase[i], SlaveBase[i] + SlaveSize[i]).
  parameter logic [NumSlaves-1:0][63:0] SlaveBase = '0,
  parameter logic [NumSlaves-1:0][63:0] SlaveSize = '0,
  parameter type req_t = logic,                      /// AXI4 request (npu_axi_typedef.svh)
  parameter type rsp_t = logic                       /// AXI4 response
) (
  input  wire                  clk_i,      /// clock
  input  wire                  rst_ni,     /// asynchronous reset, active low
  input  req_t                 slv_req_i,  /// from the master
  output rsp_t                 slv_rsp_o,
  output req_t [NumSlaves-1:0] mst_req_o,  /// to the slaves: payloads broadcast
  input  rsp_t [NumSlaves-1:0] mst_rsp_i
);
  localparam int unsigned SelWidth = $clog2(NumSlaves + 1);
  localparam logic [SelWidth-1:0] SelErr = SelWidth'(NumSlaves);  // the DECERR slave
  localparam logic [1:0] RespDecerr = 2'b11;

  initial begin
    if (NumSlaves < 1 || NumSlaves > 4) $fatal(1, "npu_axi_demux: NumSlaves must be 1..4");
  end

  // Slaves 0..NumSlaves-1, then the DECERR slave at SelErr, padded to five.
  req_t [NumSlaves:0] req;
  rsp_t [4:0]         all;
  assign mst_req_o = req[NumSlaves-1:0];
  for (genvar i = 0; i < 5; i++) begin : g_all
    if (i < NumSlaves) begin : g_slave
      assign all[i] = mst_rsp_i[i];
    end else if (i > NumSlaves) begin : g_none
      assign all[i] = '0;
    end
  end

  npu_axi_decerr #(.req_t(req_t), .rsp_t(rsp_t)) u_decerr (
    .clk_i, .rst_ni, .req_i(req[NumSlaves]), .rsp_o(all[NumSlaves])
  );

  // Routes: AR and AW go by address while their queue has room; R, W and B follow the
  // head of theirs. The lowest window that holds the address wins.
  logic [3:0]          ar_hit, aw_hit;
  logic [SelWidth-1:0] ar_sel, aw_sel, r_route, w_route, b_route;
  logic                r_route_in_ready, r_route_valid, w_route_in_ready, w_route_valid;
  logic                b_route_in_ready, b_route_valid;
  for (genvar i = 0; i < 4; i++) begin : g_decode
    if (i < NumSlaves) begin : g_window
      assign ar_hit[i] = SlaveSize[i] != 0 && 64'(slv_req_i.ar.addr) >= SlaveBase[i]
                      && 64'(slv_req_i.ar.addr) - SlaveBase[i] < SlaveSize[i];
      assign aw_hit[i] = SlaveSize[i] != 0 && 64'(slv_req_i.aw.addr) >= SlaveBase[i]
                      && 64'(slv_req_i.aw.addr) - SlaveBase[i] < SlaveSize[i];
    end else begin : g_none
      assign ar_hit[i] = 1'b0;
      assign aw_hit[i] = 1'b0;
    end
  end
  assign ar_sel = ar_hit[0] ? SelWidth'(0) : ar_hit[1] ? SelWidth'(1)
                : ar_hit[2] ? SelWidth'(2) : ar_hit[3] ? SelWidth'(3) : SelErr;
  assign aw_sel = aw_hit[0] ? SelWidth'(0) : aw_hit[1] ? SelWidth'(1)
                : aw_hit[2] ? SelWidth'(2) : aw_hit[3] ? SelWidth'(3) : SelErr;
  wire ar_pass = r_route_in_ready;
  wire aw_pass = w_route_in_ready && b_route_in_ready;

  // The steered valids and readies, one bit per slave.
  localparam int unsigned Ports = NumSlaves + 1;
  logic [Ports-1:0] aw_valids, w_valids, b_readies, ar_valids, r_readies;
  assign aw_valids = {Ports{aw_pass && slv_req_i.aw_valid}} & (Ports'(1) << aw_sel);
  assign w_valids  = {Ports{w_route_valid && slv_req_i.w_valid}} & (Ports'(1) << w_route);
  assign b_readies = {Ports{b_route_valid && slv_req_i.b_ready}} & (Ports'(1) << b_route);
  assign ar_valids = {Ports{ar_pass && slv_req_i.ar_valid}} & (Ports'(1) << ar_sel);
  assign r_readies = {Ports{r_route_valid && slv_req_i.r_ready}} & (Ports'(1) << r_route);
  for (genvar i = 0; i <= NumSlaves; i++) begin : g_req
    assign req[i] = '{aw: slv_req_i.aw, aw_valid: aw_valids[i], w: slv_req_i.w,
                      w_valid: w_valids[i], b_ready: b_readies[i], ar: slv_req_i.ar,
                      ar_valid: ar_valids[i], r_ready: r_readies[i]};
  end

  // The slaves' handshake bits as vectors, indexed by route: each selected bit depends on
  // the request anyway (the route comes from its address).
  logic [NumSlaves:0] aw_readies, w_readies, b_valids, ar_readies, r_valids;
  for (genvar i = 0; i <= NumSlaves; i++) begin : g_bits
    assign {aw_readies[i], w_readies[i], b_valids[i], ar_readies[i], r_valids[i]} =
        {all[i].aw_ready, all[i].w_ready, all[i].b_valid, all[i].ar_ready, all[i].r_valid};
  end

  // R and B from the oldest burst's slave only. A process with branches, as the idle bus
  // then skips the payloads.
  always_comb begin
    slv_rsp_o          = '0;
    slv_rsp_o.b.resp   = RespDecerr;
    slv_rsp_o.r.resp   = RespDecerr;
    slv_rsp_o.aw_ready = aw_pass && aw_readies[aw_sel];
    slv_rsp_o.w_ready  = w_route_valid && w_readies[w_route];
    slv_rsp_o.ar_ready = ar_pass && ar_readies[ar_sel];
    if (b_route_valid) begin
      slv_rsp_o.b_valid = b_valids[b_route];
      unique case (3'(b_route))
        3'd0: slv_rsp_o.b = all[0].b;
        3'd1: slv_rsp_o.b = all[1].b;
        3'd2: slv_rsp_o.b = all[2].b;
        3'd3: slv_rsp_o.b = all[3].b;
        default: slv_rsp_o.b = all[4].b;
      endcase
    end
    if (r_route_valid) begin
      slv_rsp_o.r_valid = r_valids[r_route];
      unique case (3'(r_route))
        3'd0: slv_rsp_o.r = all[0].r;
        3'd1: slv_rsp_o.r = all[1].r;
        3'd2: slv_rsp_o.r = all[2].r;
        3'd3: slv_rsp_o.r = all[3].r;
        default: slv_rsp_o.r = all[4].r;
      endcase
    end
  end

  wire ar_fire = slv_req_i.ar_valid && slv_rsp_o.ar_ready;
  wire r_done  = slv_rsp_o.r_valid && slv_req_i.r_ready && slv_rsp_o.r.last;
  wire aw_fire = slv_req_i.aw_valid && slv_rsp_o.aw_ready;
  wire w_done  = slv_req_i.w_valid && slv_rsp_o.w_ready && slv_req_i.w.last;
  wire b_fire  = slv_rsp_o.b_valid && slv_req_i.b_ready;

  npu_fifo #(.Width(SelWidth), .Depth(MaxOutstanding)) u_r_route (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(ar_sel), .in_valid_i(ar_fire), .in_ready_o(r_route_in_ready),
    .out_data_o(r_route), .out_valid_o(r_route_valid), .out_ready_i(r_done),
    .count_o()
  );
  npu_fifo #(.Width(SelWidth), .Depth(MaxOutstanding)) u_w_route (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(aw_sel), .in_valid_i(aw_fire), .in_ready_o(w_route_in_ready),
    .out_data_o(w_route), .out_valid_o(w_route_valid), .out_ready_i(w_done),
    .count_o()
  );
  npu_fifo #(.Width(SelWidth), .Depth(MaxOutstanding)) u_b_route (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(aw_sel), .in_valid_i(aw_fire), .in_ready_o(b_route_in_ready),
    .out_data_o(b_route), .out_valid_o(b_route_valid), .out_ready_i(b_fire),
    .count_o()
  );

  for (genvar s = 0; s < NumSlaves; s++) begin : g_sva
    npu_axi_sva #(.Name($sformatf("demux to slave %0d", s)), .req_t(req_t), .rsp_t(rsp_t))
    u_sva_mst (.clk_i, .rst_ni, .req_i(mst_req_o[s]), .rsp_i(mst_rsp_i[s]));
  end
endmodule

`default_nettype wire
