`default_nettype none

/// AXI4 2-to-1 multiplexer: two masters (the DMA engine, the compute engine) share one
/// path to the memories.
///
/// AR and AW are granted one burst at a time, round robin, through a registered slot. The
/// ID's top bit carries the master's index on the way down (both masters keep it 0) and
/// routes R and B back. W beats follow the AW grants in order through a small route queue,
/// so a master may send W before its AW is granted: its beats simply wait their turn.
module npu_axi_mux #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned IdWidth = 4,          /// AXI ID bits (the top one names the master)
  parameter int unsigned MaxOutstanding = 8,   /// write bursts whose W is not yet through
  localparam int unsigned DataWidth = BusBytes * 8
) (
  input  wire                             clk_i,    /// clock
  input  wire                             rst_ni,   /// asynchronous reset, active low
  // Slave ports (from the masters), index 0 and 1.
  input  wire  [1:0][IdWidth-1:0]         s_arid,
  input  wire  [1:0][AddrWidth-1:0]       s_araddr,
  input  wire  [1:0][7:0]                 s_arlen,
  input  wire  [1:0][2:0]                 s_arsize,
  input  wire  [1:0][1:0]                 s_arburst,
  input  wire  [1:0]                      s_arvalid,
  output logic [1:0]                      s_arready,
  output logic [IdWidth-1:0]              s_rid,      /// R payload (valid steered)
  output logic [DataWidth-1:0]            s_rdata,
  output logic [1:0]                      s_rresp,
  output logic                            s_rlast,
  output logic [1:0]                      s_rvalid,
  input  wire  [1:0]                      s_rready,
  input  wire  [1:0][IdWidth-1:0]         s_awid,
  input  wire  [1:0][AddrWidth-1:0]       s_awaddr,
  input  wire  [1:0][7:0]                 s_awlen,
  input  wire  [1:0][2:0]                 s_awsize,
  input  wire  [1:0][1:0]                 s_awburst,
  input  wire  [1:0]                      s_awvalid,
  output logic [1:0]                      s_awready,
  input  wire  [1:0][DataWidth-1:0]       s_wdata,
  input  wire  [1:0][BusBytes-1:0]        s_wstrb,
  input  wire  [1:0]                      s_wlast,
  input  wire  [1:0]                      s_wvalid,
  output logic [1:0]                      s_wready,
  output logic [IdWidth-1:0]              s_bid,      /// B payload (valid steered)
  output logic [1:0]                      s_bresp,
  output logic [1:0]                      s_bvalid,
  input  wire  [1:0]                      s_bready,
  // Master port (to the memories).
  output logic [IdWidth-1:0]              m_arid,
  output logic [AddrWidth-1:0]            m_araddr,
  output logic [7:0]                      m_arlen,
  output logic [2:0]                      m_arsize,
  output logic [1:0]                      m_arburst,
  output logic                            m_arvalid,
  input  wire                             m_arready,
  input  wire  [IdWidth-1:0]              m_rid,
  input  wire  [DataWidth-1:0]            m_rdata,
  input  wire  [1:0]                      m_rresp,
  input  wire                             m_rlast,
  input  wire                             m_rvalid,
  output logic                            m_rready,
  output logic [IdWidth-1:0]              m_awid,
  output logic [AddrWidth-1:0]            m_awaddr,
  output logic [7:0]                      m_awlen,
  output logic [2:0]                      m_awsize,
  output logic [1:0]                      m_awburst,
  output logic                            m_awvalid,
  input  wire                             m_awready,
  output logic [DataWidth-1:0]            m_wdata,
  output logic [BusBytes-1:0]             m_wstrb,
  output logic                            m_wlast,
  output logic                            m_wvalid,
  input  wire                             m_wready,
  input  wire  [IdWidth-1:0]              m_bid,
  input  wire  [1:0]                      m_bresp,
  input  wire                             m_bvalid,
  output logic                            m_bready
);
  localparam int unsigned Top = IdWidth - 1;

  initial begin
    if (IdWidth < 2) $fatal(1, "npu_axi_mux: IdWidth must be >= 2, got %0d", IdWidth);
  end

  // ---------------------------------------------------------------- AR
  logic ar_last_q;   // master granted last (the other goes first next time)
  wire  ar_free = !m_arvalid || m_arready;
  wire  ar_pick = s_arvalid[1] && (!s_arvalid[0] || !ar_last_q);
  always_comb begin
    s_arready = '0;
    if (ar_free && |s_arvalid) s_arready[ar_pick] = 1'b1;
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      m_arvalid <= 1'b0;
      ar_last_q <= 1'b0;
      {m_arid, m_araddr, m_arlen, m_arsize, m_arburst} <= '0;
    end else if (ar_free) begin
      m_arvalid <= |s_arvalid;
      if (|s_arvalid) begin
        ar_last_q <= ar_pick;
        m_arid    <= {ar_pick, s_arid[ar_pick][Top-1:0]};
        m_araddr  <= s_araddr[ar_pick];
        m_arlen   <= s_arlen[ar_pick];
        m_arsize  <= s_arsize[ar_pick];
        m_arburst <= s_arburst[ar_pick];
      end
    end
  end

  assign s_rid    = {1'b0, m_rid[Top-1:0]};
  assign s_rdata  = m_rdata;
  assign s_rresp  = m_rresp;
  assign s_rlast  = m_rlast;
  assign s_rvalid = {m_rvalid && m_rid[Top], m_rvalid && !m_rid[Top]};
  assign m_rready = s_rready[m_rid[Top]];

  // ---------------------------------------------------------------- AW, W
  logic aw_last_q;
  logic route_ready, route_valid, route_head;
  wire  aw_free = (!m_awvalid || m_awready) && route_ready;
  wire  aw_pick = s_awvalid[1] && (!s_awvalid[0] || !aw_last_q);
  wire  aw_take = aw_free && |s_awvalid;
  always_comb begin
    s_awready = '0;
    if (aw_take) s_awready[aw_pick] = 1'b1;
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      m_awvalid <= 1'b0;
      aw_last_q <= 1'b0;
      {m_awid, m_awaddr, m_awlen, m_awsize, m_awburst} <= '0;
    end else begin
      if (m_awvalid && m_awready) m_awvalid <= 1'b0;
      if (aw_take) begin
        m_awvalid <= 1'b1;
        aw_last_q <= aw_pick;
        m_awid    <= {aw_pick, s_awid[aw_pick][Top-1:0]};
        m_awaddr  <= s_awaddr[aw_pick];
        m_awlen   <= s_awlen[aw_pick];
        m_awsize  <= s_awsize[aw_pick];
        m_awburst <= s_awburst[aw_pick];
      end
    end
  end

  // Which master's W beats go next: one entry per granted AW, in grant order.
  npu_fifo #(.Width(1), .Depth(MaxOutstanding)) u_route_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(aw_pick), .in_valid_i(aw_take), .in_ready_o(route_ready),
    .out_data_o(route_head), .out_valid_o(route_valid),
    .out_ready_i(m_wvalid && m_wready && m_wlast), .count_o()
  );

  assign m_wvalid = route_valid && s_wvalid[route_head];
  assign m_wdata  = s_wdata[route_head];
  assign m_wstrb  = s_wstrb[route_head];
  assign m_wlast  = s_wlast[route_head];
  always_comb begin
    s_wready = '0;
    s_wready[route_head] = route_valid && m_wready;
  end

  assign s_bid    = {1'b0, m_bid[Top-1:0]};
  assign s_bresp  = m_bresp;
  assign s_bvalid = {m_bvalid && m_bid[Top], m_bvalid && !m_bid[Top]};
  assign m_bready = s_bready[m_bid[Top]];

  logic unused;
  assign unused = ^{s_arid[0][Top], s_arid[1][Top], s_awid[0][Top], s_awid[1][Top]};
endmodule

`default_nettype wire
