`default_nettype none

/// AXI4 2-to-1 multiplexer: two masters (the DMA engine, the compute engine) share one
/// path to the memories.
///
/// AR and AW are granted one burst at a time, round robin, through a registered slot. The
/// ID's top bit carries the master's index on the way down (both masters keep it 0) and
/// routes R and B back. W beats follow the AW grants in order through a small route queue,
/// so a master may send W before its AW is granted: its beats simply wait their turn.
module npu_axi_mux #(
  parameter int unsigned MaxOutstanding = 8,   /// write bursts whose W is not yet through
  parameter type aw_chan_t = logic,            /// AXI4 AW payload (npu_axi_typedef.svh)
  parameter type ar_chan_t = logic,            /// AXI4 AR payload
  parameter type req_t = logic,                /// AXI4 request
  parameter type rsp_t = logic                 /// AXI4 response
) (
  input  wire        clk_i,      /// clock
  input  wire        rst_ni,     /// asynchronous reset, active low
  input  req_t [1:0] slv_req_i,  /// from the masters, index 0 and 1
  output rsp_t [1:0] slv_rsp_o,  /// R and B payloads shared, valids steered by ID
  output req_t       mst_req_o,  /// to the memories (the ID's top bit names the master)
  input  rsp_t       mst_rsp_i
);
  // Written as npu_axi_demux explains: conditionals rather than indexed selects of the
  // struct arrays, and the clocked processes read wires, not the struct ports.
  localparam int unsigned Top = $bits(mst_rsp_i.r.id) - 1;  // the ID bit that names the master

  initial begin
    if (Top < 1) $fatal(1, "npu_axi_mux: IDs must have 2 bits or more, got %0d", Top + 1);
  end

  // ---------------------------------------------------------------- AR
  ar_chan_t ar_q;
  logic     ar_valid_q;
  logic     ar_last_q;   // master granted last (the other goes first next time)
  wire      ar_any  = slv_req_i[0].ar_valid || slv_req_i[1].ar_valid;
  wire      ar_free = !ar_valid_q || mst_rsp_i.ar_ready;
  wire      ar_pick = slv_req_i[1].ar_valid && (!slv_req_i[0].ar_valid || !ar_last_q);
  ar_chan_t ar_in;
  assign ar_in = ar_pick ? slv_req_i[1].ar : slv_req_i[0].ar;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ar_valid_q <= 1'b0;
      ar_last_q  <= 1'b0;
      ar_q       <= '0;
    end else if (ar_free) begin
      ar_valid_q <= ar_any;
      if (ar_any) begin
        ar_last_q     <= ar_pick;
        ar_q          <= ar_in;
        ar_q.id[Top]  <= ar_pick;
      end
    end
  end

  wire r_to = mst_rsp_i.r.id[Top];

  // ---------------------------------------------------------------- AW, W
  aw_chan_t aw_q;
  logic     aw_valid_q;
  logic     aw_last_q;
  logic     route_ready, route_valid, route_head;
  wire      aw_free = (!aw_valid_q || mst_rsp_i.aw_ready) && route_ready;
  wire      aw_pick = slv_req_i[1].aw_valid && (!slv_req_i[0].aw_valid || !aw_last_q);
  wire      aw_take = aw_free && (slv_req_i[0].aw_valid || slv_req_i[1].aw_valid);
  wire      aw_done = aw_valid_q && mst_rsp_i.aw_ready;
  aw_chan_t aw_in;
  assign aw_in = aw_pick ? slv_req_i[1].aw : slv_req_i[0].aw;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      aw_valid_q <= 1'b0;
      aw_last_q  <= 1'b0;
      aw_q       <= '0;
    end else begin
      if (aw_done) aw_valid_q <= 1'b0;
      if (aw_take) begin
        aw_valid_q    <= 1'b1;
        aw_last_q     <= aw_pick;
        aw_q          <= aw_in;
        aw_q.id[Top]  <= aw_pick;
      end
    end
  end

  // Which master's W beats go next: one entry per granted AW, in grant order.
  npu_fifo #(.Width(1), .Depth(MaxOutstanding)) u_route_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(aw_pick), .in_valid_i(aw_take), .in_ready_o(route_ready),
    .out_data_o(route_head), .out_valid_o(route_valid),
    .out_ready_i(mst_req_o.w_valid && mst_rsp_i.w_ready && mst_req_o.w.last), .count_o()
  );

  wire b_to = mst_rsp_i.b.id[Top];

  // Conditionals, not `slv_req_i[index]` (see npu_axi_demux).
  assign mst_req_o = '{
    aw: aw_q, aw_valid: aw_valid_q,
    w: route_head ? slv_req_i[1].w : slv_req_i[0].w,
    w_valid: route_valid && (route_head ? slv_req_i[1].w_valid : slv_req_i[0].w_valid),
    b_ready: b_to ? slv_req_i[1].b_ready : slv_req_i[0].b_ready,
    ar: ar_q, ar_valid: ar_valid_q,
    r_ready: r_to ? slv_req_i[1].r_ready : slv_req_i[0].r_ready
  };

  for (genvar i = 0; i < 2; i++) begin : g_slv
    assign slv_rsp_o[i] = '{
      aw_ready: aw_take && aw_pick == 1'(i),
      w_ready: route_valid && route_head == 1'(i) && mst_rsp_i.w_ready,
      b: '{id: {1'b0, mst_rsp_i.b.id[Top-1:0]}, resp: mst_rsp_i.b.resp},
      b_valid: mst_rsp_i.b_valid && b_to == 1'(i),
      ar_ready: ar_free && ar_any && ar_pick == 1'(i),
      r: '{id: {1'b0, mst_rsp_i.r.id[Top-1:0]}, data: mst_rsp_i.r.data,
           resp: mst_rsp_i.r.resp, last: mst_rsp_i.r.last},
      r_valid: mst_rsp_i.r_valid && r_to == 1'(i)
    };
  end

  logic unused;
  assign unused = ^{slv_req_i[0].ar.id[Top], slv_req_i[1].ar.id[Top],
                    slv_req_i[0].aw.id[Top], slv_req_i[1].aw.id[Top]};

  npu_axi_sva #(.Name("mux to memories"), .req_t(req_t), .rsp_t(rsp_t)) u_sva_mst (
    .clk_i, .rst_ni, .req_i(mst_req_o), .rsp_i(mst_rsp_i)
  );
endmodule

`default_nettype wire
