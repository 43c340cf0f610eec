`default_nettype none

/// AXI4-Lite 1-to-2 demultiplexer for the register blocks, one access at a time per side.
///
/// Port 0 decodes [Base0, Base0 + BlockSize), port 1 [Base1, Base1 + BlockSize); slaves
/// see the 12-bit offset inside their block. Any other address answers DECERR. One
/// outstanding access per side keeps this small.
///
/// No register stage: while a side is idle its address (and write data) handshakes go
/// straight through to the block the address selects, and the block's response comes
/// straight back, so a demux costs no cycle (a read or write through a PeakRDL block takes
/// 3 cycles back to back; with registered stages here it took 5). The selected block is
/// remembered from the address handshake to the response handshake; `ready` stays low in
/// between, which holds a second request back.
module npu_axil_demux #(
  parameter logic [31:0] Base0 = 32'h4000_0000,  /// first block (NPU CSRs)
  parameter logic [31:0] Base1 = 32'h8000_0000,  /// second block (DMA CSRs)
  parameter logic [31:0] BlockSize = 32'h1000    /// bytes each block decodes (4 KiB)
) (
  input  wire               clk_i,      /// clock
  input  wire               rst_ni,     /// asynchronous reset, active low
  // From the CPU.
  output logic              s_awready,
  input  wire               s_awvalid,
  input  wire  [31:0]       s_awaddr,
  input  wire  [2:0]        s_awprot,
  output logic              s_wready,
  input  wire               s_wvalid,
  input  wire  [31:0]       s_wdata,
  input  wire  [3:0]        s_wstrb,
  input  wire               s_bready,
  output logic              s_bvalid,
  output logic [1:0]        s_bresp,
  output logic              s_arready,
  input  wire               s_arvalid,
  input  wire  [31:0]       s_araddr,
  input  wire  [2:0]        s_arprot,
  input  wire               s_rready,
  output logic              s_rvalid,
  output logic [31:0]       s_rdata,
  output logic [1:0]        s_rresp,
  // To the two blocks (payload shared, valid/ready per block).
  output logic [11:0]       m_awaddr,
  output logic [2:0]        m_awprot,
  output logic [1:0]        m_awvalid,
  input  wire  [1:0]        m_awready,
  output logic [31:0]       m_wdata,
  output logic [3:0]        m_wstrb,
  output logic [1:0]        m_wvalid,
  input  wire  [1:0]        m_wready,
  input  wire  [1:0]        m_bvalid,
  input  wire  [1:0][1:0]   m_bresp,
  output logic [1:0]        m_bready,
  output logic [11:0]       m_araddr,
  output logic [2:0]        m_arprot,
  output logic [1:0]        m_arvalid,
  input  wire  [1:0]        m_arready,
  input  wire  [1:0]        m_rvalid,
  input  wire  [1:0][31:0]  m_rdata,
  input  wire  [1:0][1:0]   m_rresp,
  output logic [1:0]        m_rready
);
  localparam logic [1:0] RespDecerr = 2'b11;

  // 0 / 1: a block; 2: nobody.
  function automatic logic [1:0] decode(logic [31:0] addr);
    if (addr - Base0 < BlockSize) return 2'd0;
    if (addr - Base1 < BlockSize) return 2'd1;
    return 2'd2;
  endfunction

  // ---------------------------------------------------------------- writes
  typedef enum logic [1:0] {WrAddr, WrResp, WrDecerr} wr_state_e;
  wr_state_e   wr_state_q;
  logic        aw_got_q, w_got_q;  // handshakes of the current write already made
  logic [1:0]  wr_sel_q;           // its block, once AW went through
  logic [1:0]  wr_sel;
  logic        wr_known, aw_take, w_take;

  // The block of the write: known once AW is offered (W waits for it: a slave may hold
  // WREADY until it sees the address).
  assign wr_sel    = aw_got_q ? wr_sel_q : decode(s_awaddr);
  assign wr_known  = aw_got_q || s_awvalid;
  assign s_awready = wr_state_q == WrAddr && !aw_got_q
                  && (wr_sel == 2'd2 || m_awready[wr_sel[0]]);
  assign s_wready  = wr_state_q == WrAddr && !w_got_q && wr_known
                  && (wr_sel == 2'd2 || m_wready[wr_sel[0]]);
  assign aw_take   = s_awvalid && s_awready;
  assign w_take    = s_wvalid && s_wready;
  assign s_bvalid  = wr_state_q == WrDecerr || (wr_state_q == WrResp && m_bvalid[wr_sel_q[0]]);
  assign s_bresp   = wr_state_q == WrDecerr ? RespDecerr : m_bresp[wr_sel_q[0]];
  assign m_awaddr  = s_awaddr[11:0];
  assign m_awprot  = s_awprot;
  assign m_wdata   = s_wdata;
  assign m_wstrb   = s_wstrb;

  always_comb begin
    m_awvalid = '0;
    m_wvalid  = '0;
    m_bready  = '0;
    if (wr_state_q == WrAddr && wr_sel != 2'd2) begin
      m_awvalid[wr_sel[0]] = s_awvalid && !aw_got_q;
      m_wvalid[wr_sel[0]]  = s_wvalid && !w_got_q && wr_known;
    end
    if (wr_state_q == WrResp) m_bready[wr_sel_q[0]] = s_bready;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_state_q <= WrAddr;
      aw_got_q   <= 1'b0;
      w_got_q    <= 1'b0;
      wr_sel_q   <= '0;
    end else begin
      unique case (wr_state_q)
        WrAddr: begin
          if (aw_take) begin
            aw_got_q <= 1'b1;
            wr_sel_q <= wr_sel;
          end
          if (w_take) w_got_q <= 1'b1;
          if ((aw_got_q || aw_take) && (w_got_q || w_take)) begin
            aw_got_q   <= 1'b0;
            w_got_q    <= 1'b0;
            wr_sel_q   <= wr_sel;
            wr_state_q <= wr_sel == 2'd2 ? WrDecerr : WrResp;
          end
        end
        WrResp, WrDecerr: if (s_bvalid && s_bready) wr_state_q <= WrAddr;
        default: wr_state_q <= WrAddr;
      endcase
    end
  end

  // ---------------------------------------------------------------- reads
  typedef enum logic [1:0] {RdAddr, RdResp, RdDecerr} rd_state_e;
  rd_state_e   rd_state_q;
  logic        rd_sel_q;  // the block of the read in flight
  logic [1:0]  rd_sel;

  assign rd_sel    = decode(s_araddr);
  assign s_arready = rd_state_q == RdAddr && (rd_sel == 2'd2 || m_arready[rd_sel[0]]);
  assign s_rvalid  = rd_state_q == RdDecerr || (rd_state_q == RdResp && m_rvalid[rd_sel_q]);
  assign s_rdata   = rd_state_q == RdResp ? m_rdata[rd_sel_q] : '0;
  assign s_rresp   = rd_state_q == RdDecerr ? RespDecerr : m_rresp[rd_sel_q];
  assign m_araddr  = s_araddr[11:0];
  assign m_arprot  = s_arprot;

  always_comb begin
    m_arvalid = '0;
    m_rready  = '0;
    if (rd_state_q == RdAddr && rd_sel != 2'd2) m_arvalid[rd_sel[0]] = s_arvalid;
    if (rd_state_q == RdResp) m_rready[rd_sel_q] = s_rready;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_state_q <= RdAddr;
      rd_sel_q   <= '0;
    end else begin
      unique case (rd_state_q)
        RdAddr: if (s_arvalid && s_arready) begin
          rd_sel_q   <= rd_sel[0];
          rd_state_q <= rd_sel == 2'd2 ? RdDecerr : RdResp;
        end
        RdResp, RdDecerr: if (s_rvalid && s_rready) rd_state_q <= RdAddr;
        default: rd_state_q <= RdAddr;
      endcase
    end
  end
endmodule

`default_nettype wire
