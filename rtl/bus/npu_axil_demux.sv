`default_nettype none

/// AXI4-Lite 1-to-2 demultiplexer for the register blocks, one access at a time per side.
///
/// Port 0 decodes [Base0, Base0 + BlockSize), port 1 [Base1, Base1 + BlockSize); slaves
/// see the 12-bit offset inside their block. Any other address answers DECERR. Register
/// accesses are rare and slow (a CPU or the emulator's harness), so one outstanding access
/// per side keeps this small.
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
  typedef enum logic [1:0] {WrCollect, WrIssue, WrWait, WrRespond} wr_state_e;
  wr_state_e   wr_state_q;
  logic        aw_got_q, w_got_q, aw_sent_q, w_sent_q;
  logic [31:0] awaddr_q, wdata_q;
  logic [2:0]  awprot_q;
  logic [3:0]  wstrb_q;
  logic [1:0]  wr_sel_q, bresp_q;

  assign s_awready = wr_state_q == WrCollect && !aw_got_q;
  assign s_wready  = wr_state_q == WrCollect && !w_got_q;
  assign s_bvalid  = wr_state_q == WrRespond;
  assign s_bresp   = bresp_q;
  assign m_awaddr  = awaddr_q[11:0];
  assign m_awprot  = awprot_q;
  assign m_wdata   = wdata_q;
  assign m_wstrb   = wstrb_q;

  always_comb begin
    m_awvalid = '0;
    m_wvalid  = '0;
    m_bready  = '0;
    if (wr_state_q == WrIssue && wr_sel_q != 2'd2) begin
      m_awvalid[wr_sel_q[0]] = !aw_sent_q;
      m_wvalid[wr_sel_q[0]]  = !w_sent_q;
    end
    if (wr_state_q == WrWait) m_bready[wr_sel_q[0]] = 1'b1;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_state_q <= WrCollect;
      aw_got_q   <= 1'b0;
      w_got_q    <= 1'b0;
      aw_sent_q  <= 1'b0;
      w_sent_q   <= 1'b0;
      awaddr_q   <= '0;
      awprot_q   <= '0;
      wdata_q    <= '0;
      wstrb_q    <= '0;
      wr_sel_q   <= '0;
      bresp_q    <= '0;
    end else begin
      unique case (wr_state_q)
        WrCollect: begin
          if (s_awvalid && s_awready) begin
            aw_got_q <= 1'b1;
            awaddr_q <= s_awaddr;
            awprot_q <= s_awprot;
          end
          if (s_wvalid && s_wready) begin
            w_got_q <= 1'b1;
            wdata_q <= s_wdata;
            wstrb_q <= s_wstrb;
          end
          if ((aw_got_q || s_awvalid) && (w_got_q || s_wvalid)) begin
            wr_sel_q   <= decode(aw_got_q ? awaddr_q : s_awaddr);
            aw_sent_q  <= 1'b0;
            w_sent_q   <= 1'b0;
            wr_state_q <= WrIssue;
          end
        end
        WrIssue: begin
          if (wr_sel_q == 2'd2) begin
            bresp_q    <= RespDecerr;
            wr_state_q <= WrRespond;
          end else begin
            if (m_awvalid[wr_sel_q[0]] && m_awready[wr_sel_q[0]]) aw_sent_q <= 1'b1;
            if (m_wvalid[wr_sel_q[0]] && m_wready[wr_sel_q[0]]) w_sent_q <= 1'b1;
            if ((aw_sent_q || m_awready[wr_sel_q[0]]) && (w_sent_q || m_wready[wr_sel_q[0]]))
              wr_state_q <= WrWait;
          end
        end
        WrWait: if (m_bvalid[wr_sel_q[0]]) begin
          bresp_q    <= m_bresp[wr_sel_q[0]];
          wr_state_q <= WrRespond;
        end
        WrRespond: if (s_bready) begin
          aw_got_q   <= 1'b0;
          w_got_q    <= 1'b0;
          wr_state_q <= WrCollect;
        end
        default: wr_state_q <= WrCollect;
      endcase
    end
  end

  // ---------------------------------------------------------------- reads
  typedef enum logic [1:0] {RdIdle, RdIssue, RdWait, RdRespond} rd_state_e;
  rd_state_e   rd_state_q;
  logic [11:0] araddr_q;
  logic [31:0] rdata_q;
  logic [2:0]  arprot_q;
  logic [1:0]  rd_sel_q, rresp_q;

  assign s_arready = rd_state_q == RdIdle;
  assign s_rvalid  = rd_state_q == RdRespond;
  assign s_rdata   = rdata_q;
  assign s_rresp   = rresp_q;
  assign m_araddr  = araddr_q;
  assign m_arprot  = arprot_q;

  always_comb begin
    m_arvalid = '0;
    m_rready  = '0;
    if (rd_state_q == RdIssue && rd_sel_q != 2'd2) m_arvalid[rd_sel_q[0]] = 1'b1;
    if (rd_state_q == RdWait) m_rready[rd_sel_q[0]] = 1'b1;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_state_q <= RdIdle;
      araddr_q   <= '0;
      arprot_q   <= '0;
      rd_sel_q   <= '0;
      rdata_q    <= '0;
      rresp_q    <= '0;
    end else begin
      unique case (rd_state_q)
        RdIdle: if (s_arvalid) begin
          araddr_q   <= s_araddr[11:0];
          arprot_q   <= s_arprot;
          rd_sel_q   <= decode(s_araddr);
          rd_state_q <= RdIssue;
        end
        RdIssue: begin
          if (rd_sel_q == 2'd2) begin
            rdata_q    <= '0;
            rresp_q    <= RespDecerr;
            rd_state_q <= RdRespond;
          end else if (m_arready[rd_sel_q[0]]) begin
            rd_state_q <= RdWait;
          end
        end
        RdWait: if (m_rvalid[rd_sel_q[0]]) begin
          rdata_q    <= m_rdata[rd_sel_q[0]];
          rresp_q    <= m_rresp[rd_sel_q[0]];
          rd_state_q <= RdRespond;
        end
        RdRespond: if (s_rready) rd_state_q <= RdIdle;
        default: rd_state_q <= RdIdle;
      endcase
    end
  end
endmodule

`default_nettype wire
