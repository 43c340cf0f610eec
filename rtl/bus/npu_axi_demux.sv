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
module npu_axi_demux #(
  parameter int unsigned NumSlaves = 2,              /// decoded slaves (1..4)
  parameter int unsigned BusBytes = 16,              /// bytes per data beat
  parameter int unsigned AddrWidth = 40,             /// AXI address bits
  parameter int unsigned IdWidth = 4,                /// AXI ID bits
  parameter int unsigned MaxOutstanding = 8,         /// bursts in flight per side
  /// Slave i decodes [SlaveBase[i], SlaveBase[i] + SlaveSize[i]).
  parameter logic [NumSlaves-1:0][63:0] SlaveBase = '0,
  parameter logic [NumSlaves-1:0][63:0] SlaveSize = '0,
  localparam int unsigned DataWidth = BusBytes * 8
) (
  input  wire                                 clk_i,   /// clock
  input  wire                                 rst_ni,  /// asynchronous reset, active low
  // Slave port (from the master).
  input  wire  [IdWidth-1:0]                  s_arid,
  input  wire  [AddrWidth-1:0]                s_araddr,
  input  wire  [7:0]                          s_arlen,
  input  wire  [2:0]                          s_arsize,
  input  wire  [1:0]                          s_arburst,
  input  wire                                 s_arvalid,
  output logic                                s_arready,
  output logic [IdWidth-1:0]                  s_rid,
  output logic [DataWidth-1:0]                s_rdata,
  output logic [1:0]                          s_rresp,
  output logic                                s_rlast,
  output logic                                s_rvalid,
  input  wire                                 s_rready,
  input  wire  [IdWidth-1:0]                  s_awid,
  input  wire  [AddrWidth-1:0]                s_awaddr,
  input  wire  [7:0]                          s_awlen,
  input  wire  [2:0]                          s_awsize,
  input  wire  [1:0]                          s_awburst,
  input  wire                                 s_awvalid,
  output logic                                s_awready,
  input  wire  [DataWidth-1:0]                s_wdata,
  input  wire  [BusBytes-1:0]                 s_wstrb,
  input  wire                                 s_wlast,
  input  wire                                 s_wvalid,
  output logic                                s_wready,
  output logic [IdWidth-1:0]                  s_bid,
  output logic [1:0]                          s_bresp,
  output logic                                s_bvalid,
  input  wire                                 s_bready,
  // Master ports (to the slaves): payloads broadcast, valid/ready per slave.
  output logic [IdWidth-1:0]                  m_arid,
  output logic [AddrWidth-1:0]                m_araddr,
  output logic [7:0]                          m_arlen,
  output logic [2:0]                          m_arsize,
  output logic [1:0]                          m_arburst,
  output logic [NumSlaves-1:0]                m_arvalid,
  input  wire  [NumSlaves-1:0]                m_arready,
  input  wire  [NumSlaves-1:0][IdWidth-1:0]   m_rid,
  input  wire  [NumSlaves-1:0][DataWidth-1:0] m_rdata,
  input  wire  [NumSlaves-1:0][1:0]           m_rresp,
  input  wire  [NumSlaves-1:0]                m_rlast,
  input  wire  [NumSlaves-1:0]                m_rvalid,
  output logic [NumSlaves-1:0]                m_rready,
  output logic [IdWidth-1:0]                  m_awid,
  output logic [AddrWidth-1:0]                m_awaddr,
  output logic [7:0]                          m_awlen,
  output logic [2:0]                          m_awsize,
  output logic [1:0]                          m_awburst,
  output logic [NumSlaves-1:0]                m_awvalid,
  input  wire  [NumSlaves-1:0]                m_awready,
  output logic [DataWidth-1:0]                m_wdata,
  output logic [BusBytes-1:0]                 m_wstrb,
  output logic                                m_wlast,
  output logic [NumSlaves-1:0]                m_wvalid,
  input  wire  [NumSlaves-1:0]                m_wready,
  input  wire  [NumSlaves-1:0][IdWidth-1:0]   m_bid,
  input  wire  [NumSlaves-1:0][1:0]           m_bresp,
  input  wire  [NumSlaves-1:0]                m_bvalid,
  output logic [NumSlaves-1:0]                m_bready
);
  localparam int unsigned SelWidth = $clog2(NumSlaves + 1);
  localparam logic [SelWidth-1:0] SelErr = SelWidth'(NumSlaves);  // the DECERR slave
  localparam logic [1:0] RespDecerr = 2'b11;

  initial begin
    if (NumSlaves < 1 || NumSlaves > 4) $fatal(1, "npu_axi_demux: NumSlaves must be 1..4");
  end

  function automatic logic [SelWidth-1:0] decode(logic [AddrWidth-1:0] addr);
    for (int i = 0; i < NumSlaves; i++) begin
      if (SlaveSize[i] != 0 && 64'(addr) >= SlaveBase[i]
          && 64'(addr) - SlaveBase[i] < SlaveSize[i]) return SelWidth'(i);
    end
    return SelErr;
  endfunction

  // Broadcast payloads.
  assign m_arid    = s_arid;
  assign m_araddr  = s_araddr;
  assign m_arlen   = s_arlen;
  assign m_arsize  = s_arsize;
  assign m_arburst = s_arburst;
  assign m_awid    = s_awid;
  assign m_awaddr  = s_awaddr;
  assign m_awlen   = s_awlen;
  assign m_awsize  = s_awsize;
  assign m_awburst = s_awburst;
  assign m_wdata   = s_wdata;
  assign m_wstrb   = s_wstrb;
  assign m_wlast   = s_wlast;

  // DECERR slave.
  logic             err_arvalid, err_arready, err_rlast, err_rvalid, err_rready;
  logic             err_awvalid, err_awready, err_wvalid, err_wready, err_bvalid, err_bready;
  logic [IdWidth-1:0] err_rid, err_bid;
  npu_axi_decerr #(.IdWidth(IdWidth)) u_decerr (
    .clk_i, .rst_ni,
    .arid_i(s_arid), .arlen_i(s_arlen), .arvalid_i(err_arvalid), .arready_o(err_arready),
    .rid_o(err_rid), .rlast_o(err_rlast), .rvalid_o(err_rvalid), .rready_i(err_rready),
    .awid_i(s_awid), .awvalid_i(err_awvalid), .awready_o(err_awready),
    .wlast_i(s_wlast), .wvalid_i(err_wvalid), .wready_o(err_wready),
    .bid_o(err_bid), .bvalid_o(err_bvalid), .bready_i(err_bready)
  );

  // ---------------------------------------------------------------- reads
  logic [SelWidth-1:0] ar_sel, r_route;
  logic                r_route_in_ready, r_route_valid;
  assign ar_sel = decode(s_araddr);
  wire ar_pass = r_route_in_ready;

  always_comb begin
    m_arvalid   = '0;
    err_arvalid = 1'b0;
    s_arready   = 1'b0;
    if (ar_pass) begin
      if (ar_sel == SelErr) begin
        err_arvalid = s_arvalid;
        s_arready   = err_arready;
      end else begin
        m_arvalid[ar_sel] = s_arvalid;
        s_arready         = m_arready[ar_sel];
      end
    end
    // R from the oldest burst's slave only.
    m_rready   = '0;
    err_rready = 1'b0;
    s_rvalid   = 1'b0;
    s_rid      = '0;
    s_rdata    = '0;
    s_rresp    = RespDecerr;
    s_rlast    = 1'b0;
    if (r_route_valid) begin
      if (r_route == SelErr) begin
        s_rvalid   = err_rvalid;
        s_rid      = err_rid;
        s_rlast    = err_rlast;
        err_rready = s_rready;
      end else begin
        s_rvalid = m_rvalid[r_route];
        s_rid    = m_rid[r_route];
        s_rdata  = m_rdata[r_route];
        s_rresp  = m_rresp[r_route];
        s_rlast  = m_rlast[r_route];
        m_rready[r_route] = s_rready;
      end
    end
  end

  wire ar_fire = s_arvalid && s_arready;
  wire r_done  = s_rvalid && s_rready && s_rlast;

  npu_fifo #(.Width(SelWidth), .Depth(MaxOutstanding)) u_r_route (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(ar_sel), .in_valid_i(ar_fire), .in_ready_o(r_route_in_ready),
    .out_data_o(r_route), .out_valid_o(r_route_valid), .out_ready_i(r_done),
    .count_o()
  );

  // ---------------------------------------------------------------- writes
  logic [SelWidth-1:0] aw_sel, w_route, b_route;
  logic                route_in_ready, route_valid, b_route_in_ready, b_route_valid;
  assign aw_sel = decode(s_awaddr);
  wire aw_pass = route_in_ready && b_route_in_ready;

  always_comb begin
    m_awvalid   = '0;
    err_awvalid = 1'b0;
    s_awready   = 1'b0;
    if (aw_pass) begin
      if (aw_sel == SelErr) begin
        err_awvalid = s_awvalid;
        s_awready   = err_awready;
      end else begin
        m_awvalid[aw_sel] = s_awvalid;
        s_awready         = m_awready[aw_sel];
      end
    end
    m_wvalid   = '0;
    err_wvalid = 1'b0;
    s_wready   = 1'b0;
    if (route_valid) begin
      if (w_route == SelErr) begin
        err_wvalid = s_wvalid;
        s_wready   = err_wready;
      end else begin
        m_wvalid[w_route] = s_wvalid;
        s_wready          = m_wready[w_route];
      end
    end
    // B from the oldest burst's slave only.
    m_bready   = '0;
    err_bready = 1'b0;
    s_bvalid   = 1'b0;
    s_bid      = '0;
    s_bresp    = RespDecerr;
    if (b_route_valid) begin
      if (b_route == SelErr) begin
        s_bvalid   = err_bvalid;
        s_bid      = err_bid;
        err_bready = s_bready;
      end else begin
        s_bvalid = m_bvalid[b_route];
        s_bid    = m_bid[b_route];
        s_bresp  = m_bresp[b_route];
        m_bready[b_route] = s_bready;
      end
    end
  end

  wire aw_fire = s_awvalid && s_awready;
  wire w_done  = s_wvalid && s_wready && s_wlast;
  wire b_fire  = s_bvalid && s_bready;

  npu_fifo #(.Width(SelWidth), .Depth(MaxOutstanding)) u_w_route (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(aw_sel), .in_valid_i(aw_fire), .in_ready_o(route_in_ready),
    .out_data_o(w_route), .out_valid_o(route_valid), .out_ready_i(w_done),
    .count_o()
  );
  npu_fifo #(.Width(SelWidth), .Depth(MaxOutstanding)) u_b_route (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(aw_sel), .in_valid_i(aw_fire), .in_ready_o(b_route_in_ready),
    .out_data_o(b_route), .out_valid_o(b_route_valid), .out_ready_i(b_fire),
    .count_o()
  );
endmodule

`default_nettype wire
