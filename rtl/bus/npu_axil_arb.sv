`default_nettype none

/// AXI4-Lite 2-to-1 arbiter, one transaction at a time.
///
/// Port 0 is the simulation's register bus master, port 1 the toplevel's AXI4-Lite port
/// (cocotbext-axi in tests, a C++ loop in benches). When both ask for a free bus, the one
/// that did not have it last goes first (round robin); the other waits with its request
/// held. A port owns the bus from its first address or data handshake to its response
/// handshake; port 0 also keeps it while `lock0_i` is high, which makes its
/// read-modify-write (masked write) atomic. The grant is combinational while the bus is
/// free, so an access costs no extra cycle.
module npu_axil_arb (
  input  wire         clk_i,       /// clock
  input  wire         rst_ni,      /// asynchronous reset, active low
  input  wire         lock0_i,     /// port 0 keeps the bus between its transactions
  // Port 0.
  input  wire         s0_awvalid,  /// write address
  output logic        s0_awready,
  input  wire  [31:0] s0_awaddr,
  input  wire  [2:0]  s0_awprot,
  input  wire         s0_wvalid,   /// write data
  output logic        s0_wready,
  input  wire  [31:0] s0_wdata,
  input  wire  [3:0]  s0_wstrb,
  output logic        s0_bvalid,   /// write response
  input  wire         s0_bready,
  output logic [1:0]  s0_bresp,
  input  wire         s0_arvalid,  /// read address
  output logic        s0_arready,
  input  wire  [31:0] s0_araddr,
  input  wire  [2:0]  s0_arprot,
  output logic        s0_rvalid,   /// read data
  input  wire         s0_rready,
  output logic [31:0] s0_rdata,
  output logic [1:0]  s0_rresp,
  // Port 1.
  input  wire         s1_awvalid,  /// write address
  output logic        s1_awready,
  input  wire  [31:0] s1_awaddr,
  input  wire  [2:0]  s1_awprot,
  input  wire         s1_wvalid,   /// write data
  output logic        s1_wready,
  input  wire  [31:0] s1_wdata,
  input  wire  [3:0]  s1_wstrb,
  output logic        s1_bvalid,   /// write response
  input  wire         s1_bready,
  output logic [1:0]  s1_bresp,
  input  wire         s1_arvalid,  /// read address
  output logic        s1_arready,
  input  wire  [31:0] s1_araddr,
  input  wire  [2:0]  s1_arprot,
  output logic        s1_rvalid,   /// read data
  input  wire         s1_rready,
  output logic [31:0] s1_rdata,
  output logic [1:0]  s1_rresp,
  // To the slave.
  output logic        m_awvalid,   /// write address
  input  wire         m_awready,
  output logic [31:0] m_awaddr,
  output logic [2:0]  m_awprot,
  output logic        m_wvalid,    /// write data
  input  wire         m_wready,
  output logic [31:0] m_wdata,
  output logic [3:0]  m_wstrb,
  input  wire         m_bvalid,    /// write response
  output logic        m_bready,
  input  wire  [1:0]  m_bresp,
  output logic        m_arvalid,   /// read address
  input  wire         m_arready,
  output logic [31:0] m_araddr,
  output logic [2:0]  m_arprot,
  input  wire         m_rvalid,    /// read data
  output logic        m_rready,
  input  wire  [31:0] m_rdata,
  input  wire  [1:0]  m_rresp
);
  logic pending_q;  // a transaction has started and its response is not through yet
  logic owner_q;    // the port it belongs to (or that last had the bus)
  logic owned, sel;

  wire req0 = s0_awvalid || s0_wvalid || s0_arvalid;
  wire req1 = s1_awvalid || s1_wvalid || s1_arvalid;
  assign owned = pending_q || (!owner_q && lock0_i);
  assign sel   = owned ? owner_q : (req0 && req1) ? !owner_q : !req0;

  assign m_awvalid = sel ? s1_awvalid : s0_awvalid;
  assign m_awaddr  = sel ? s1_awaddr : s0_awaddr;
  assign m_awprot  = sel ? s1_awprot : s0_awprot;
  assign m_wvalid  = sel ? s1_wvalid : s0_wvalid;
  assign m_wdata   = sel ? s1_wdata : s0_wdata;
  assign m_wstrb   = sel ? s1_wstrb : s0_wstrb;
  assign m_bready  = sel ? s1_bready : s0_bready;
  assign m_arvalid = sel ? s1_arvalid : s0_arvalid;
  assign m_araddr  = sel ? s1_araddr : s0_araddr;
  assign m_arprot  = sel ? s1_arprot : s0_arprot;
  assign m_rready  = sel ? s1_rready : s0_rready;

  assign s0_awready = !sel && m_awready;
  assign s0_wready  = !sel && m_wready;
  assign s0_bvalid  = !sel && m_bvalid;
  assign s0_arready = !sel && m_arready;
  assign s0_rvalid  = !sel && m_rvalid;
  assign s1_awready = sel && m_awready;
  assign s1_wready  = sel && m_wready;
  assign s1_bvalid  = sel && m_bvalid;
  assign s1_arready = sel && m_arready;
  assign s1_rvalid  = sel && m_rvalid;
  assign s0_bresp   = m_bresp;
  assign s1_bresp   = m_bresp;
  assign s0_rdata   = m_rdata;
  assign s1_rdata   = m_rdata;
  assign s0_rresp   = m_rresp;
  assign s1_rresp   = m_rresp;

  wire start = (m_awvalid && m_awready) || (m_wvalid && m_wready) || (m_arvalid && m_arready);
  wire done  = (m_bvalid && m_bready) || (m_rvalid && m_rready);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      pending_q <= 1'b0;
      owner_q   <= 1'b1;
    end else if (start) begin
      pending_q <= 1'b1;
      owner_q   <= sel;
    end else if (done) begin
      pending_q <= 1'b0;
    end
  end
endmodule

`default_nettype wire
